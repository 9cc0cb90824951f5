// Internal to the GPT model: a block's element-wise kernels (bias adds, residual sums, bias
// gradients) spread over the matrix products' OpenMP threads, where they ran on one thread while
// the other waited. Rows go to threads in contiguous runs; sums over rows take a partial per
// kRowBlock rows added in block order (parallel_loops.h), so no result depends on the thread count.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "kernels/accelerator.h"
#include "kernels/cpu/transformer_kernels.h"
#include "kernels/device_array.h"

namespace ds::runtime::gpt {

// out[r] += bias for each of `rows` rows of `dim`.
void addBiasRows(kernels::Accelerator& acc, const kernels::TransformerKernels& k, float* out,
                 const float* bias, size_t rows, size_t dim);
// y += x over rows x dim elements.
void addRows(kernels::Accelerator& acc, const kernels::TransformerKernels& k, float* y,
             const float* x, size_t rows, size_t dim);
// out = a + b over rows x dim elements, in one pass per run of rows (a copy, then an add while the
// run is in cache); out may be a.
void sumRows(kernels::Accelerator& acc, const kernels::TransformerKernels& k, float* out,
             const float* a, const float* b, size_t rows, size_t dim);
// dbias += the sum over rows of dout; `partials` is scratch the caller keeps between calls.
// `produce`, where given, first writes dout's rows [r0, r1) of each block, which are then summed
// while in cache (the activation's backward before its bias gradient); the sums are the same.
void biasGradientRows(kernels::Accelerator& acc, const kernels::TransformerKernels& k, float* dbias,
                      const float* dout, size_t rows, size_t dim,
                      kernels::DeviceArray<float>& partials,
                      const std::function<void(size_t r0, size_t r1)>& produce = {});

// k.crossEntropy over `rows` rows of `vocab` logits (each row's softmax gradient written in place),
// the rows spread over the threads: the loss is the rows' losses added in row order from zero, the
// serial kernel's sum to the last bit. `rowLosses` is scratch the caller keeps between calls.
double crossEntropyRows(kernels::Accelerator& acc, const kernels::TransformerKernels& k,
                        float* logits, const int32_t* targets, size_t rows, size_t vocab,
                        float gradScale, std::vector<double>& rowLosses);

}  // namespace ds::runtime::gpt
