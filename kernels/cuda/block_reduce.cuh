// Warp and block reductions for the row kernels (norms, softmax): shuffles within a warp, one
// value per warp through shared memory, then a shuffle over those. Every thread of the block gets
// the result. Sums are in a fixed order for a given block size, so runs repeat bit for bit.
#pragma once

#include <cuda_runtime.h>

namespace ds::kernels::cuda {

constexpr int kWarpSize = 32;

struct SumOp {
  static constexpr float kIdentity = 0.0f;
  __device__ static float apply(float a, float b) { return a + b; }
};

// As the CPU kernels' laneMax: a NaN never replaces a number already held.
struct MaxOp {
  static constexpr float kIdentity = -__builtin_huge_valf();
  __device__ static float apply(float a, float b) { return b > a ? b : a; }
};

template <class Op>
__device__ inline float warpReduce(float v) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2)
    v = Op::apply(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// blockDim.x must be a multiple of 32 (at most 1024); `scratch` is __shared__ float[32]. Every
// thread of the block must call it (it synchronises the block).
template <class Op>
__device__ inline float blockReduce(float v, float* scratch) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int warps = blockDim.x / kWarpSize;
  v = warpReduce<Op>(v);
  __syncthreads();  // the scratch may still be read by the previous call's last warp
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  return warpReduce<Op>(lane < warps ? scratch[lane] : Op::kIdentity);
}

// Threads per row block: the row's length rounded up to whole warps, within [32, maxThreads].
inline int rowThreads(size_t dim, int maxThreads) {
  const size_t rounded = (dim + kWarpSize - 1) / kWarpSize * kWarpSize;
  return rounded < kWarpSize                         ? kWarpSize
         : rounded > static_cast<size_t>(maxThreads) ? maxThreads
                                                     : static_cast<int>(rounded);
}

// Blocks for a grid-stride loop over n elements: enough to fill the GPU, never past the grid's
// limit.
inline unsigned gridFor(size_t n, int threads) {
  const size_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(blocks < 1 ? 1 : blocks > 65535 ? 65535 : blocks);
}

}  // namespace ds::kernels::cuda
