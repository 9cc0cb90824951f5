// The LayerNorm and RMSNorm backward over many rows on the matrix products' OpenMP threads. The
// weight and bias gradient sums are taken per block of kRowBlock rows (parallel_loops.h), a partial
// each, then added in block order: the same bits at any thread count.
#pragma once

#include <cstddef>
#include <vector>

#include "kernels/accelerator.h"
#include "kernels/cpu/transformer_kernels.h"
#include "kernels/device_array.h"

namespace ds::runtime::gpt {

// dx as k.layerNormBackward writes it; dw, db += the sums over all rows. `partials` is scratch,
// kept by the caller so its allocation is reused call after call.
void layerNormBackwardRows(kernels::Accelerator& acc, const kernels::TransformerKernels& k,
                           float* dx, float* dw, float* db, const float* dout, const float* x,
                           const float* mean, const float* rstd, const float* w, size_t rows,
                           size_t dim, kernels::DeviceArray<float>& partials);

// dx as k.rmsNormBackward writes it; dw += the sum over all rows.
void rmsNormBackwardRows(kernels::Accelerator& acc, const kernels::TransformerKernels& k, float* dx,
                         float* dw, const float* dout, const float* x, const float* norm,
                         const float* w, size_t rows, size_t dim, float eps,
                         kernels::DeviceArray<float>& partials);

}  // namespace ds::runtime::gpt
