// Row blocks of the norms' backward (see norm_backward.h): each block's gradient sums start from
// zero in their own slot, so threads never add into the same element.
#include "runtime/model/norm_backward.h"

#include <algorithm>

#include "runtime/model/parallel_loops.h"

namespace ds::runtime::gpt {
namespace {

// Runs block(r0, r1, partial) for every kNormRowBlock rows, partial being `width` zeros of its
// own, then adds each output's columns of the partials into it, block after block.
template <class Block>
void overRowBlocks(const kernels::TransformerKernels& k, size_t rows, size_t width,
                   std::vector<float>& partials, Block block, float* out0, float* out1 = nullptr) {
  const size_t blocks = (rows + kNormRowBlock - 1) / kNormRowBlock;
  const size_t perBlock = out1 ? 2 * width : width;
  partials.resize(blocks * perBlock);
  float* p = partials.data();
  parallelFor(blocks, [&](size_t b) {
    float* mine = p + b * perBlock;
    std::fill(mine, mine + perBlock, 0.0f);
    block(b * kNormRowBlock, std::min(rows, (b + 1) * kNormRowBlock), mine);
  });
  for (size_t b = 0; b < blocks; ++b) {
    k.add(out0, p + b * perBlock, width);
    if (out1) k.add(out1, p + b * perBlock + width, width);
  }
}

}  // namespace

void layerNormBackwardRows(const kernels::TransformerKernels& k, float* dx, float* dw, float* db,
                           const float* dout, const float* x, const float* mean, const float* rstd,
                           const float* w, size_t rows, size_t dim, std::vector<float>& partials) {
  overRowBlocks(
      k, rows, dim, partials,
      [&](size_t r0, size_t r1, float* partial) {
        k.layerNormBackward(dx + r0 * dim, partial, partial + dim, dout + r0 * dim, x + r0 * dim,
                            mean + r0, rstd + r0, w, r1 - r0, dim);
      },
      dw, db);
}

void rmsNormBackwardRows(const kernels::TransformerKernels& k, float* dx, float* dw,
                         const float* dout, const float* x, const float* norm, const float* w,
                         size_t rows, size_t dim, float eps, std::vector<float>& partials) {
  overRowBlocks(
      k, rows, dim, partials,
      [&](size_t r0, size_t r1, float* partial) {
        k.rmsNormBackward(dx + r0 * dim, partial, dout + r0 * dim, x + r0 * dim, norm + r0, w,
                          r1 - r0, dim, eps);
      },
      dw);
}

}  // namespace ds::runtime::gpt
