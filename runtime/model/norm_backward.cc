// Row blocks of the norms' backward (see norm_backward.h): each block's gradient sums start from
// zero in their own slot (overRowBlocks), so threads never add into the same element.
#include "runtime/model/norm_backward.h"

#include "runtime/model/parallel_loops.h"

namespace ds::runtime::gpt {

void layerNormBackwardRows(kernels::Accelerator& acc, const kernels::TransformerKernels& k,
                           float* dx, float* dw, float* db, const float* dout, const float* x,
                           const float* mean, const float* rstd, const float* w, size_t rows,
                           size_t dim, kernels::DeviceArray<float>& partials) {
  overRowBlocks(
      acc, k, rows, dim, partials,
      [&](size_t r0, size_t r1, float* partial) {
        k.layerNormBackward(dx + r0 * dim, partial, partial + dim, dout + r0 * dim, x + r0 * dim,
                            mean + r0, rstd + r0, w, r1 - r0, dim);
      },
      dw, db);
}

void rmsNormBackwardRows(kernels::Accelerator& acc, const kernels::TransformerKernels& k, float* dx,
                         float* dw, const float* dout, const float* x, const float* norm,
                         const float* w, size_t rows, size_t dim, float eps,
                         kernels::DeviceArray<float>& partials) {
  overRowBlocks(
      acc, k, rows, dim, partials,
      [&](size_t r0, size_t r1, float* partial) {
        k.rmsNormBackward(dx + r0 * dim, partial, dout + r0 * dim, x + r0 * dim, norm + r0, w,
                          r1 - r0, dim, eps);
      },
      dw);
}

}  // namespace ds::runtime::gpt
