// Internal to the GPT model: the loops that spread a block's per-head and per-row work over the
// OpenMP threads the matrix products use. parallelFor and parallelRows only for work whose
// iterations write disjoint outputs; anything summed across rows goes through overRowBlocks' fixed
// partials.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#include "kernels/cpu/parallel_for.h"
#include "kernels/cpu/transformer_kernels.h"

namespace ds::runtime::gpt {

using kernels::parallelFor;

// Element-wise work over `rows` rows, in one contiguous run of rows per thread.
template <class Fn>
void parallelRows(size_t rows, Fn fn) {
  constexpr size_t kChunks = 8;  // a few per thread: even when rows do not divide evenly
  const size_t chunks = std::min(rows, kChunks);
  parallelFor(chunks, [&](size_t c) { fn(rows * c / chunks, rows * (c + 1) / chunks); });
}

// Sums over rows (norm weights, biases) are taken per block of kRowBlock rows. Fixed, never derived
// from the thread count: it sets the summation order.
constexpr size_t kRowBlock = 32;

// Runs block(r0, r1, partial) for every kRowBlock rows, partial being `width` zeros of its own (two
// runs of `width` with out1), then adds each output's columns of the partials into it, block after
// block: the same bits at any thread count (a block is never split by threads).
template <class Block>
void overRowBlocks(const kernels::TransformerKernels& k, size_t rows, size_t width,
                   std::vector<float>& partials, Block block, float* out0, float* out1 = nullptr) {
  const size_t blocks = (rows + kRowBlock - 1) / kRowBlock;
  const size_t perBlock = out1 ? 2 * width : width;
  partials.resize(blocks * perBlock);
  float* p = partials.data();
  parallelFor(blocks, [&](size_t b) {
    float* mine = p + b * perBlock;
    std::fill(mine, mine + perBlock, 0.0f);
    block(b * kRowBlock, std::min(rows, (b + 1) * kRowBlock), mine);
  });
  for (size_t b = 0; b < blocks; ++b) {
    k.add(out0, p + b * perBlock, width);
    if (out1) k.add(out1, p + b * perBlock + width, width);
  }
}

}  // namespace ds::runtime::gpt
