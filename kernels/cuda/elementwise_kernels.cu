// The element-wise kernels on the GPU: activations and their gated forms (GeLU, SwiGLU, ...),
// rotary embedding, embedding gather and its scatter-add, bias, residual add and dropout. Grid-stride loops over
// kernel_math.h's functions, one template instance per Unit so that no loop branches on it.
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/kernel_math.h"

namespace ds::kernels::cuda {
namespace {

constexpr int kThreads = 256;

__device__ inline size_t firstIndex() {
  return blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
}
__device__ inline size_t gridStride() { return static_cast<size_t>(gridDim.x) * blockDim.x; }

template <Unit U>
__global__ void unitForwardKernel(float* out, const float* in, size_t n) {
  for (size_t i = firstIndex(); i < n; i += gridStride()) out[i] = math::unitValue<U>(in[i]);
}

template <Unit U>
__global__ void unitBackwardKernel(float* din, const float* dout, const float* in, size_t n) {
  for (size_t i = firstIndex(); i < n; i += gridStride())
    din[i] = dout[i] * math::unitDerivative<U>(in[i]);
}

// in [rows, 2 ff] = [x | gate], out [rows, ff] = x * f(gate).
template <Unit U>
__global__ void gatedForwardKernel(float* out, const float* in, size_t rows, size_t ff) {
  for (size_t e = firstIndex(); e < rows * ff; e += gridStride()) {
    const size_t r = e / ff, i = e % ff;
    const float* x = in + r * 2 * ff;
    out[e] = x[i] * math::unitValue<U>(x[ff + i]);
  }
}

template <Unit U>
__global__ void gatedBackwardKernel(float* din, const float* dout, const float* in, size_t rows,
                                    size_t ff) {
  for (size_t e = firstIndex(); e < rows * ff; e += gridStride()) {
    const size_t r = e / ff, i = e % ff;
    const float* x = in + r * 2 * ff;
    float* dx = din + r * 2 * ff;
    const float g = dout[e], gate = x[ff + i];
    dx[i] = g * math::unitValue<U>(gate);
    dx[ff + i] = g * x[i] * math::unitDerivative<U>(gate);
  }
}

// Launches kernel<U> for the run-time unit u.
template <template <Unit> class Launch, class... Args>
void withUnit(Unit u, Args... args) {
  switch (u) {
    case Unit::Gelu:
      return Launch<Unit::Gelu>::run(args...);
    case Unit::Relu:
      return Launch<Unit::Relu>::run(args...);
    case Unit::Silu:
      return Launch<Unit::Silu>::run(args...);
    case Unit::Sigmoid:
      return Launch<Unit::Sigmoid>::run(args...);
    case Unit::Identity:
      return Launch<Unit::Identity>::run(args...);
    case Unit::Softsign:
      return Launch<Unit::Softsign>::run(args...);
    case Unit::Mish:
      return Launch<Unit::Mish>::run(args...);
  }
}

template <Unit U>
struct UnitForward {
  static void run(float* out, const float* in, size_t n, cudaStream_t stream) {
    unitForwardKernel<U><<<gridFor(n, kThreads), kThreads, 0, stream>>>(out, in, n);
  }
};
template <Unit U>
struct UnitBackward {
  static void run(float* din, const float* dout, const float* in, size_t n, cudaStream_t stream) {
    unitBackwardKernel<U><<<gridFor(n, kThreads), kThreads, 0, stream>>>(din, dout, in, n);
  }
};
template <Unit U>
struct GatedForward {
  static void run(float* out, const float* in, size_t rows, size_t ff, cudaStream_t stream) {
    gatedForwardKernel<U><<<gridFor(rows * ff, kThreads), kThreads, 0, stream>>>(out, in, rows, ff);
  }
};
template <Unit U>
struct GatedBackward {
  static void run(float* din, const float* dout, const float* in, size_t rows, size_t ff,
                  cudaStream_t stream) {
    gatedBackwardKernel<U>
        <<<gridFor(rows * ff, kThreads), kThreads, 0, stream>>>(din, dout, in, rows, ff);
  }
};

// One thread per rotated pair (row, head, i < rotDim / 2).
__global__ void rotaryKernel(float* x, size_t rows, size_t seq, size_t heads, size_t headDim,
                             size_t stride, size_t half, const float* cos, const float* sin,
                             float sign) {
  const size_t pairs = rows * heads * half;
  for (size_t e = firstIndex(); e < pairs; e += gridStride()) {
    const size_t i = e % half, h = (e / half) % heads, r = e / (half * heads);
    const size_t angle = (r % seq) * half + i;
    float* v = x + r * stride + h * headDim;
    math::rotatePair(v[i], v[i + half], cos[angle], sin[angle], sign);
  }
}

__global__ void embeddingForwardKernel(float* out, const int32_t* ids, const float* table,
                                       const float* pos, size_t rows, size_t seq, size_t dim) {
  for (size_t e = firstIndex(); e < rows * dim; e += gridStride()) {
    const size_t r = e / dim, i = e % dim;
    const float value = table[static_cast<size_t>(ids[r]) * dim + i];
    out[e] = pos ? value + pos[(r % seq) * dim + i] : value;
  }
}

// One thread per column, the rows in order: each element gets its additions in the CPU kernel's
// order (so the same bits), and no two threads add into one element, whatever the ids repeat.
__global__ void embeddingBackwardKernel(float* dtable, float* dpos, const int32_t* ids,
                                        const float* dout, size_t rows, size_t seq, size_t dim) {
  for (size_t i = firstIndex(); i < dim; i += gridStride())
    for (size_t r = 0; r < rows; ++r) {
      const float g = dout[r * dim + i];
      dtable[static_cast<size_t>(ids[r]) * dim + i] += g;
      if (dpos) dpos[(r % seq) * dim + i] += g;
    }
}

__global__ void addBiasKernel(float* out, const float* bias, size_t rows, size_t dim) {
  for (size_t e = firstIndex(); e < rows * dim; e += gridStride()) out[e] += bias[e % dim];
}

__global__ void addKernel(float* y, const float* x, size_t n) {
  for (size_t i = firstIndex(); i < n; i += gridStride()) y[i] += x[i];
}

__global__ void dropoutKernel(const float* in, float* out, size_t n, uint64_t start,
                              uint32_t threshold, float keepScale) {
  for (size_t i = firstIndex(); i < n; i += gridStride())
    out[i] = math::dropoutValue(in[i], start + i, threshold, keepScale);
}

}  // namespace

void unitForward(Unit f, float* out, const float* in, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  withUnit<UnitForward>(f, out, in, n, stream);
  DS_CUDA_CHECK_LAUNCH();
}

void unitBackward(Unit f, float* din, const float* dout, const float* in, size_t n,
                  cudaStream_t stream) {
  if (n == 0) return;
  withUnit<UnitBackward>(f, din, dout, in, n, stream);
  DS_CUDA_CHECK_LAUNCH();
}

void gatedForward(Unit f, float* out, const float* in, size_t rows, size_t ff,
                  cudaStream_t stream) {
  if (rows * ff == 0) return;
  withUnit<GatedForward>(f, out, in, rows, ff, stream);
  DS_CUDA_CHECK_LAUNCH();
}

void gatedBackward(Unit f, float* din, const float* dout, const float* in, size_t rows, size_t ff,
                   cudaStream_t stream) {
  if (rows * ff == 0) return;
  withUnit<GatedBackward>(f, din, dout, in, rows, ff, stream);
  DS_CUDA_CHECK_LAUNCH();
}

void rotary(float* x, size_t rows, size_t seq, size_t heads, size_t headDim, size_t stride,
            size_t rotDim, const float* cos, const float* sin, bool inverse, cudaStream_t stream) {
  const size_t half = rotDim / 2, pairs = rows * heads * half;
  if (pairs == 0) return;
  rotaryKernel<<<gridFor(pairs, kThreads), kThreads, 0, stream>>>(
      x, rows, seq, heads, headDim, stride, half, cos, sin, inverse ? -1.0f : 1.0f);
  DS_CUDA_CHECK_LAUNCH();
}

void embeddingForward(float* out, const int32_t* ids, const float* table, const float* pos,
                      size_t rows, size_t seq, size_t dim, cudaStream_t stream) {
  if (rows * dim == 0) return;
  embeddingForwardKernel<<<gridFor(rows * dim, kThreads), kThreads, 0, stream>>>(
      out, ids, table, pos, rows, seq, dim);
  DS_CUDA_CHECK_LAUNCH();
}

void embeddingBackward(float* dtable, float* dpos, const int32_t* ids, const float* dout,
                       size_t rows, size_t seq, size_t dim, cudaStream_t stream) {
  if (rows * dim == 0) return;
  embeddingBackwardKernel<<<gridFor(dim, kThreads), kThreads, 0, stream>>>(dtable, dpos, ids,
                                                                           dout, rows, seq, dim);
  DS_CUDA_CHECK_LAUNCH();
}

void addBias(float* out, const float* bias, size_t rows, size_t dim, cudaStream_t stream) {
  if (rows * dim == 0) return;
  addBiasKernel<<<gridFor(rows * dim, kThreads), kThreads, 0, stream>>>(out, bias, rows, dim);
  DS_CUDA_CHECK_LAUNCH();
}

void add(float* y, const float* x, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  addKernel<<<gridFor(n, kThreads), kThreads, 0, stream>>>(y, x, n);
  DS_CUDA_CHECK_LAUNCH();
}

void dropout(const float* in, float* out, size_t n, uint64_t base, uint64_t first,
             uint32_t threshold, float keepScale, cudaStream_t stream) {
  if (n == 0) return;
  dropoutKernel<<<gridFor(n, kThreads), kThreads, 0, stream>>>(in, out, n, base + first, threshold,
                                                               keepScale);
  DS_CUDA_CHECK_LAUNCH();
}

}  // namespace ds::kernels::cuda
