// The CUDA kernels' host entry points: each launches its kernel on `stream` over device pointers,
// with the contract of its CPU namesake (kernels/cpu/transformer_kernels.h, adam_kernel.h,
// accelerator.h's unscaleGradients), and throws ds::Error when the launch fails. Plain C++: the
// kernels themselves are in the .cu files beside it.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "common/dtype.h"
#include "kernels/attention.h"
#include "kernels/cpu/adam_kernel.h"
#include "kernels/cpu/cpu_adam.h"
#include "kernels/cpu/transformer_kernels.h"

namespace ds::kernels::cuda {

// norm_kernels.cu: one block per row, block reductions; dw/db summed over rows in chunks.
void layerNormForward(float* out, float* mean, float* rstd, const float* x, const float* w,
                      const float* b, size_t rows, size_t dim, float eps, cudaStream_t stream);
void layerNormBackward(float* dx, float* dw, float* db, const float* dout, const float* x,
                       const float* mean, const float* rstd, const float* w, size_t rows,
                       size_t dim, cudaStream_t stream);
void rmsNormForward(float* out, float* norm, const float* x, const float* w, size_t rows,
                    size_t dim, float eps, cudaStream_t stream);
void rmsNormBackward(float* dx, float* dw, const float* dout, const float* x, const float* norm,
                     const float* w, size_t rows, size_t dim, cudaStream_t stream);
// dbias += sum over rows of dout[r].
void biasGradient(float* dbias, const float* dout, size_t rows, size_t dim, cudaStream_t stream);

// elementwise_kernels.cu
void unitForward(Unit f, float* out, const float* in, size_t n, cudaStream_t stream);
void unitBackward(Unit f, float* din, const float* dout, const float* in, size_t n,
                  cudaStream_t stream);
void gatedForward(Unit f, float* out, const float* in, size_t rows, size_t ff, cudaStream_t stream);
void gatedBackward(Unit f, float* din, const float* dout, const float* in, size_t rows, size_t ff,
                   cudaStream_t stream);
void rotary(float* x, size_t rows, size_t seq, size_t heads, size_t headDim, size_t stride,
            size_t rotDim, const float* cos, const float* sin, bool inverse, cudaStream_t stream);
void embeddingForward(float* out, const int32_t* ids, const float* table, const float* pos,
                      size_t rows, size_t seq, size_t dim, cudaStream_t stream);
// dtable[ids[r]] += dout[r] (and dpos[r % seq] += dout[r] when dpos is not null), rows in order.
void embeddingBackward(float* dtable, float* dpos, const int32_t* ids, const float* dout,
                       size_t rows, size_t seq, size_t dim, cudaStream_t stream);
void addBias(float* out, const float* bias, size_t rows, size_t dim, cudaStream_t stream);
void add(float* y, const float* x, size_t n, cudaStream_t stream);
void dropout(const float* in, float* out, size_t n, uint64_t base, uint64_t first,
             uint32_t threshold, float keepScale, cudaStream_t stream);

// cross_entropy_kernel.cu: softmax and its gradient fused, one block per row; losses[r] (device,
// doubles) is row r's loss (0 for a masked row), which the caller sums in row order.
void crossEntropy(float* logits, const int32_t* targets, size_t rows, size_t vocab, float gradScale,
                  double* losses, cudaStream_t stream);

// attention_kernels.cu: Accelerator::attentionForward/Backward's contract (dropout's sample bases
// in host memory, copied for the call).
void attentionForward(const AttentionShape& s, const float* qkv, float* ctx, float* stats,
                      const AttentionDropout* dropout, cudaStream_t stream);
void attentionBackward(const AttentionShape& s, const float* qkv, const float* ctx,
                       const float* stats, const float* dCtx, float* dqkv,
                       const AttentionDropout* dropout, cudaStream_t stream);

// optimizer_kernels.cu
void adamStep(float* params, const float* grads, float* m, float* v, size_t count,
              const AdamStepConstants& constants, const HalfCopy& copy, cudaStream_t stream);
void unscaleGradients(const void* in, DType type, float* out, size_t count, float unscale,
                      uint32_t* overflow, cudaStream_t stream);

}  // namespace ds::kernels::cuda
