// The optimizer's kernels on the GPU: fused Adam/AdamW over flat fp32 buffers (kernel_math.h's
// adamElement, which is adamUpdate's maths, optionally writing bf16/fp16 params in the same
// pass), and the fp16 overflow check fused with the unscale of the gradients.
#include <string>

#include "common/error.h"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/kernel_math.h"

namespace ds::kernels::cuda {
namespace {

constexpr int kThreads = 256;

template <HalfFormat F>
__global__ void adamKernel(float* params, const float* grads, float* m, float* v, size_t count,
                           AdamStepConstants c, uint16_t* half) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    float p = params[i], mi = m[i], vi = v[i];
    math::adamElement(p, grads[i], mi, vi, c);
    params[i] = p;
    m[i] = mi;
    v[i] = vi;
    if constexpr (F == HalfFormat::Bf16) half[i] = math::floatToBf16Bits(p);
    if constexpr (F == HalfFormat::Fp16) half[i] = math::floatToFp16Bits(p);
  }
}

template <DType T>
__device__ inline float loadAsFloat(const void* in, size_t i) {
  if constexpr (T == DType::F32) {
    return static_cast<const float*>(in)[i];
  } else if constexpr (T == DType::BF16) {
    return math::bf16BitsToFloat(static_cast<const uint16_t*>(in)[i]);
  } else {
    return math::fp16BitsToFloat(static_cast<const uint16_t*>(in)[i]);
  }
}

template <DType T>
__global__ void unscaleKernel(const void* in, float* out, size_t count, float unscale,
                              uint32_t* overflow) {
  bool bad = false;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const float value = loadAsFloat<T>(in, i);
    bad = bad || !math::isFinite(value);
    out[i] = value * unscale;
  }
  // One store per warp that saw a non-finite value; every writer writes the same 1.
  if (__any_sync(0xffffffffu, bad) && threadIdx.x % kWarpSize == 0) *overflow = 1;
}

}  // namespace

void adamStep(float* params, const float* grads, float* m, float* v, size_t count,
              const AdamStepConstants& constants, const HalfCopy& copy, cudaStream_t stream) {
  if (count == 0) return;
  if (copy.out && copy.format == HalfFormat::None)
    throw Error("cuda adamStep: a half copy needs a format (bf16 or fp16)");
  const unsigned blocks = gridFor(count, kThreads);
  switch (copy.out ? copy.format : HalfFormat::None) {
    case HalfFormat::None:
      adamKernel<HalfFormat::None>
          <<<blocks, kThreads, 0, stream>>>(params, grads, m, v, count, constants, nullptr);
      break;
    case HalfFormat::Bf16:
      adamKernel<HalfFormat::Bf16>
          <<<blocks, kThreads, 0, stream>>>(params, grads, m, v, count, constants, copy.out);
      break;
    case HalfFormat::Fp16:
      adamKernel<HalfFormat::Fp16>
          <<<blocks, kThreads, 0, stream>>>(params, grads, m, v, count, constants, copy.out);
      break;
  }
  DS_CUDA_CHECK_LAUNCH();
}

void unscaleGradients(const void* in, DType type, float* out, size_t count, float unscale,
                      uint32_t* overflow, cudaStream_t stream) {
  if (count == 0) return;
  const unsigned blocks = gridFor(count, kThreads);
  switch (type) {
    case DType::F32:
      unscaleKernel<DType::F32><<<blocks, kThreads, 0, stream>>>(in, out, count, unscale, overflow);
      break;
    case DType::BF16:
      unscaleKernel<DType::BF16>
          <<<blocks, kThreads, 0, stream>>>(in, out, count, unscale, overflow);
      break;
    case DType::F16:
      unscaleKernel<DType::F16><<<blocks, kThreads, 0, stream>>>(in, out, count, unscale, overflow);
      break;
  }
  DS_CUDA_CHECK_LAUNCH();
}

}  // namespace ds::kernels::cuda
