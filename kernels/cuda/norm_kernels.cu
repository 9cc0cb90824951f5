// LayerNorm, RMSNorm and the bias gradient on the GPU: one block per row for the row statistics
// and dx; the weight gradients (sums over rows per column) in two passes, partial sums over
// chunks of rows, then the chunks added in order into dw, so results repeat bit for bit.
#include <string>

#include "common/error.h"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/kernel_math.h"

namespace ds::kernels::cuda {
namespace {

constexpr int kRowThreads = 512;
constexpr int kColumnThreads = 256;
constexpr size_t kChunkRows = 64;

__global__ void layerNormForwardKernel(float* out, float* mean, float* rstd, const float* x,
                                       const float* w, const float* b, size_t dim, float eps) {
  __shared__ float scratch[32];
  const float* xr = x + blockIdx.x * dim;
  float* o = out + blockIdx.x * dim;
  float s = 0.0f;
  for (size_t i = threadIdx.x; i < dim; i += blockDim.x) s += xr[i];
  const float mu = blockReduce<SumOp>(s, scratch) / static_cast<float>(dim);
  float q = 0.0f;
  for (size_t i = threadIdx.x; i < dim; i += blockDim.x) q += (xr[i] - mu) * (xr[i] - mu);
  const float var = blockReduce<SumOp>(q, scratch) / static_cast<float>(dim);
  const float rs = 1.0f / sqrtf(var + eps);
  for (size_t i = threadIdx.x; i < dim; i += blockDim.x)
    o[i] = math::layerNormValue(xr[i], mu, rs, w[i], b[i]);
  if (threadIdx.x == 0) {
    mean[blockIdx.x] = mu;
    rstd[blockIdx.x] = rs;
  }
}

__global__ void layerNormInputGradKernel(float* dx, const float* dout, const float* x,
                                         const float* mean, const float* rstd, const float* w,
                                         size_t dim) {
  __shared__ float scratch[32];
  const size_t offset = blockIdx.x * dim;
  const float *xr = x + offset, *g = dout + offset;
  const float mu = mean[blockIdx.x], s = rstd[blockIdx.x];
  float sa = 0.0f, sc = 0.0f;
  for (size_t i = threadIdx.x; i < dim; i += blockDim.x) {
    sa += g[i] * w[i];
    sc += g[i] * w[i] * ((xr[i] - mu) * s);
  }
  const float a = blockReduce<SumOp>(sa, scratch) / static_cast<float>(dim);
  const float c = blockReduce<SumOp>(sc, scratch) / static_cast<float>(dim);
  for (size_t i = threadIdx.x; i < dim; i += blockDim.x)
    dx[offset + i] = math::layerNormInputGrad(g[i], xr[i], w[i], mu, s, a, c);
}

__global__ void rmsNormForwardKernel(float* out, float* norm, const float* x, const float* w,
                                     size_t dim, float eps) {
  __shared__ float scratch[32];
  const float* xr = x + blockIdx.x * dim;
  float* o = out + blockIdx.x * dim;
  float q = 0.0f;
  for (size_t i = threadIdx.x; i < dim; i += blockDim.x) q += xr[i] * xr[i];
  const float s = math::rmsNormScale(blockReduce<SumOp>(q, scratch) / static_cast<float>(dim), eps);
  for (size_t i = threadIdx.x; i < dim; i += blockDim.x) o[i] = math::rmsNormValue(xr[i], s, w[i]);
  if (threadIdx.x == 0) norm[blockIdx.x] = s;
}

__global__ void rmsNormInputGradKernel(float* dx, const float* dout, const float* x,
                                       const float* norm, const float* w, size_t dim) {
  __shared__ float scratch[32];
  const size_t offset = blockIdx.x * dim;
  const float *xr = x + offset, *g = dout + offset;
  const float s = norm[blockIdx.x];
  float sgx = 0.0f;
  for (size_t i = threadIdx.x; i < dim; i += blockDim.x) sgx += g[i] * w[i] * xr[i];
  const float gx = blockReduce<SumOp>(sgx, scratch);
  const float k = s * s * s * gx / static_cast<float>(dim);  // d s / d x_i = -s^3 x_i / dim
  for (size_t i = threadIdx.x; i < dim; i += blockDim.x)
    dx[offset + i] = math::rmsNormInputGrad(g[i], xr[i], w[i], s, k);
}

// The per-column terms summed over rows: Terms values for (row, column).
struct LayerNormWeightTerms {
  static constexpr int kTerms = 2;  // dw, db
  const float *dout, *x, *mean, *rstd;
  size_t dim;
  __device__ void operator()(size_t r, size_t i, float* t) const {
    const float g = dout[r * dim + i];
    t[0] = math::layerNormWeightGrad(g, x[r * dim + i], mean[r], rstd[r]);
    t[1] = g;
  }
};

struct RmsNormWeightTerms {
  static constexpr int kTerms = 1;
  const float *dout, *x, *norm;
  size_t dim;
  __device__ void operator()(size_t r, size_t i, float* t) const {
    t[0] = math::rmsNormWeightGrad(dout[r * dim + i], x[r * dim + i], norm[r]);
  }
};

struct BiasTerms {
  static constexpr int kTerms = 1;
  const float* dout;
  size_t dim;
  __device__ void operator()(size_t r, size_t i, float* t) const { t[0] = dout[r * dim + i]; }
};

// partial[term][chunk][column]: the sum of term over the chunk's rows (blockIdx.y is the chunk).
template <class Terms>
__global__ void columnPartialsKernel(float* partial, size_t rows, size_t dim, size_t chunks,
                                     Terms terms) {
  const size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i >= dim) return;
  const size_t r0 = blockIdx.y * kChunkRows, r1 = r0 + kChunkRows < rows ? r0 + kChunkRows : rows;
  float sum[Terms::kTerms] = {};
  float t[Terms::kTerms];
  for (size_t r = r0; r < r1; ++r) {
    terms(r, i, t);
#pragma unroll
    for (int j = 0; j < Terms::kTerms; ++j) sum[j] += t[j];
  }
#pragma unroll
  for (int j = 0; j < Terms::kTerms; ++j) partial[(j * chunks + blockIdx.y) * dim + i] = sum[j];
}

// target[column] += the chunks' partial sums, in chunk order.
__global__ void addColumnTotalsKernel(float* target, const float* partial, size_t chunks,
                                      size_t dim) {
  const size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (i >= dim) return;
  float s = 0.0f;
  for (size_t c = 0; c < chunks; ++c) s += partial[c * dim + i];
  target[i] += s;
}

// Adds each term's column sums into its target (targets[j] for term j).
template <class Terms>
void addColumnSums(float* const* targets, size_t rows, size_t dim, Terms terms,
                   cudaStream_t stream) {
  if (rows == 0 || dim == 0) return;
  const size_t chunks = (rows + kChunkRows - 1) / kChunkRows;
  float* partial = nullptr;
  DS_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&partial),
                                Terms::kTerms * chunks * dim * sizeof(float), stream));
  const dim3 grid(static_cast<unsigned>((dim + kColumnThreads - 1) / kColumnThreads),
                  static_cast<unsigned>(chunks));
  columnPartialsKernel<<<grid, kColumnThreads, 0, stream>>>(partial, rows, dim, chunks, terms);
  DS_CUDA_CHECK_LAUNCH();
  const unsigned columnBlocks = static_cast<unsigned>((dim + kColumnThreads - 1) / kColumnThreads);
  for (int j = 0; j < Terms::kTerms; ++j) {
    addColumnTotalsKernel<<<columnBlocks, kColumnThreads, 0, stream>>>(
        targets[j], partial + j * chunks * dim, chunks, dim);
    DS_CUDA_CHECK_LAUNCH();
  }
  DS_CUDA_CHECK(cudaFreeAsync(partial, stream));
}

// A grid's y dimension holds at most 65535 chunks: 4.2M rows at 64 rows a chunk.
constexpr size_t kMaxRows = 65535 * kChunkRows;

void checkRows(size_t rows, const char* kernel) {
  if (rows > kMaxRows)
    throw Error(std::string("cuda ") + kernel + ": " + std::to_string(rows) +
                " rows, more than one launch takes (" + std::to_string(kMaxRows) + ")");
}

}  // namespace

void layerNormForward(float* out, float* mean, float* rstd, const float* x, const float* w,
                      const float* b, size_t rows, size_t dim, float eps, cudaStream_t stream) {
  if (rows == 0) return;
  checkRows(rows, "layerNormForward");
  layerNormForwardKernel<<<static_cast<unsigned>(rows), rowThreads(dim, kRowThreads), 0, stream>>>(
      out, mean, rstd, x, w, b, dim, eps);
  DS_CUDA_CHECK_LAUNCH();
}

void layerNormBackward(float* dx, float* dw, float* db, const float* dout, const float* x,
                       const float* mean, const float* rstd, const float* w, size_t rows,
                       size_t dim, cudaStream_t stream) {
  if (rows == 0) return;
  checkRows(rows, "layerNormBackward");
  layerNormInputGradKernel<<<static_cast<unsigned>(rows), rowThreads(dim, kRowThreads), 0,
                             stream>>>(dx, dout, x, mean, rstd, w, dim);
  DS_CUDA_CHECK_LAUNCH();
  float* targets[] = {dw, db};
  addColumnSums(targets, rows, dim, LayerNormWeightTerms{dout, x, mean, rstd, dim}, stream);
}

void rmsNormForward(float* out, float* norm, const float* x, const float* w, size_t rows,
                    size_t dim, float eps, cudaStream_t stream) {
  if (rows == 0) return;
  checkRows(rows, "rmsNormForward");
  rmsNormForwardKernel<<<static_cast<unsigned>(rows), rowThreads(dim, kRowThreads), 0, stream>>>(
      out, norm, x, w, dim, eps);
  DS_CUDA_CHECK_LAUNCH();
}

void rmsNormBackward(float* dx, float* dw, const float* dout, const float* x, const float* norm,
                     const float* w, size_t rows, size_t dim, cudaStream_t stream) {
  if (rows == 0) return;
  checkRows(rows, "rmsNormBackward");
  rmsNormInputGradKernel<<<static_cast<unsigned>(rows), rowThreads(dim, kRowThreads), 0, stream>>>(
      dx, dout, x, norm, w, dim);
  DS_CUDA_CHECK_LAUNCH();
  float* targets[] = {dw};
  addColumnSums(targets, rows, dim, RmsNormWeightTerms{dout, x, norm, dim}, stream);
}

void biasGradient(float* dbias, const float* dout, size_t rows, size_t dim, cudaStream_t stream) {
  checkRows(rows, "biasGradient");
  float* targets[] = {dbias};
  addColumnSums(targets, rows, dim, BiasTerms{dout, dim}, stream);
}

}  // namespace ds::kernels::cuda
