// Cross-entropy fused with its softmax on the GPU, one block per row of logits: the row's max,
// then exp(z - max) written in place and summed, then the loss and the gradient
// (softmax - onehot) * gradScale over the logits, as the CPU kernel (same exp, same operations;
// only the sums' order differs).
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/kernel_math.h"

namespace ds::kernels::cuda {
namespace {

constexpr int kThreads = 1024;

__global__ void crossEntropyKernel(float* logits, const int32_t* targets, size_t vocab,
                                   float gradScale, double* losses) {
  __shared__ float scratch[32];
  float* z = logits + blockIdx.x * vocab;
  const int32_t target = targets[blockIdx.x];
  if (target < 0) {  // a masked position (NeoX's label -100): no loss, a zero gradient row
    for (size_t j = threadIdx.x; j < vocab; j += blockDim.x) z[j] = 0.0f;
    if (threadIdx.x == 0) losses[blockIdx.x] = 0.0;
    return;
  }
  // Read before the block reduction below: past it, some thread may overwrite z[target].
  const float picked = z[target];
  float localMax = MaxOp::kIdentity;
  for (size_t j = threadIdx.x; j < vocab; j += blockDim.x) localMax = MaxOp::apply(localMax, z[j]);
  const float m = blockReduce<MaxOp>(localMax, scratch);
  float s = 0.0f;
  for (size_t j = threadIdx.x; j < vocab; j += blockDim.x) {
    const float e = math::expApprox(z[j] - m);
    z[j] = e;
    s += e;
  }
  const float sum = blockReduce<SumOp>(s, scratch);
  const float k = gradScale / sum;
  for (size_t j = threadIdx.x; j < vocab; j += blockDim.x) {
    float g = z[j] * k;
    if (j == static_cast<size_t>(target)) g -= gradScale;
    z[j] = g;
  }
  if (threadIdx.x == 0)
    losses[blockIdx.x] = log(static_cast<double>(sum)) + static_cast<double>(m) - picked;
}

}  // namespace

void crossEntropy(float* logits, const int32_t* targets, size_t rows, size_t vocab, float gradScale,
                  double* losses, cudaStream_t stream) {
  if (rows == 0) return;
  crossEntropyKernel<<<static_cast<unsigned>(rows), rowThreads(vocab, kThreads), 0, stream>>>(
      logits, targets, vocab, gradScale, losses);
  DS_CUDA_CHECK_LAUNCH();
}

}  // namespace ds::kernels::cuda
