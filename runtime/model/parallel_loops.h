// Internal to the GPT model: the loops that spread a block's per-head and per-row work over the
// OpenMP threads the matrix products use. parallelFor and parallelRows only for work whose
// iterations write disjoint outputs; anything summed across rows goes through overRowBlocks' fixed
// partials. On a device whose kernels do not run on the host (CUDA) the pieces run one after the
// other on the calling thread: its current stream orders them, and host threads would only add
// launches.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#include "kernels/accelerator.h"
#include "kernels/cpu/parallel_for.h"
#include "kernels/cpu/transformer_kernels.h"
#include "kernels/device_array.h"

namespace ds::runtime::gpt {

// Whether `acc`'s kernels are host code that the model spreads over its threads.
inline bool splitOverHostThreads(const kernels::Accelerator& acc) {
  return acc.kind() == DeviceKind::Cpu;
}

// fn(i) for i in [0, n): over the threads where the kernels run on the host, else in order.
template <class Fn>
void parallelFor(const kernels::Accelerator& acc, size_t n, Fn fn) {
  if (splitOverHostThreads(acc)) return kernels::parallelFor(n, fn);
  for (size_t i = 0; i < n; ++i) fn(i);
}

// Element-wise work over `rows` rows, in one contiguous run of rows per thread (one run on a
// device).
template <class Fn>
void parallelRows(const kernels::Accelerator& acc, size_t rows, Fn fn) {
  constexpr size_t kChunks = 8;  // a few per thread: even when rows do not divide evenly
  const size_t chunks = splitOverHostThreads(acc) ? std::min(rows, kChunks) : rows ? 1 : 0;
  parallelFor(acc, chunks, [&](size_t c) { fn(rows * c / chunks, rows * (c + 1) / chunks); });
}

// Sums over rows (norm weights, biases) are taken per block of kRowBlock rows. Fixed, never derived
// from the thread count: it sets the summation order.
constexpr size_t kRowBlock = 32;

// Runs block(r0, r1, partial) for every kRowBlock rows, partial being `width` zeros of its own (two
// runs of `width` with out1), then adds each output's columns of the partials into it, block after
// block: the same bits at any thread count (a block is never split by threads). On a device whose
// kernels are not host code, one block of all the rows: its kernel sums them in parallel itself,
// and a launch per 32 rows would cost more than the sums.
template <class Block>
void overRowBlocks(kernels::Accelerator& acc, const kernels::TransformerKernels& k, size_t rows,
                   size_t width, kernels::DeviceArray<float>& partials, Block block, float* out0,
                   float* out1 = nullptr) {
  const size_t blockRows = splitOverHostThreads(acc) ? kRowBlock : std::max<size_t>(rows, 1);
  const size_t blocks = (rows + blockRows - 1) / blockRows;
  const size_t perBlock = out1 ? 2 * width : width;
  float* p = partials.resize(acc, blocks * perBlock);
  parallelFor(acc, blocks, [&](size_t b) {
    float* mine = p + b * perBlock;
    acc.fillZero(mine, perBlock * sizeof(float), acc.currentStream());
    block(b * blockRows, std::min(rows, (b + 1) * blockRows), mine);
  });
  for (size_t b = 0; b < blocks; ++b) {
    k.add(out0, p + b * perBlock, width);
    if (out1) k.add(out1, p + b * perBlock + width, width);
  }
}

}  // namespace ds::runtime::gpt
