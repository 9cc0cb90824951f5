// Megatron's sequence parallelism's row movements (see sequence_parallel.h).
#include "runtime/model/sequence_parallel.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "common/error.h"

namespace ds::runtime::gpt {

BlockShape sequenceShard(size_t samples, size_t seq, Communicator* group) {
  BlockShape s = wholeRows(samples, seq);
  if (!group || group->size() == 1) return s;
  const size_t t = static_cast<size_t>(group->size());
  if (s.rows % t != 0)
    throw Error("sequence-parallel: " + std::to_string(s.rows) + " rows (" +
                std::to_string(samples) + " x " + std::to_string(seq) +
                ") do not split evenly over " + std::to_string(t) + " model ranks");
  s.local = s.rows / t;
  s.firstRow = s.local * static_cast<size_t>(group->rank());
  s.sequence = group;
  return s;
}

const float* gatherShards(kernels::Accelerator& acc, const float* x,
                          kernels::DeviceArray<float>& full, const BlockShape& s, size_t width) {
  if (!s.sequence) return x;
  float* out = sized(acc, full, s.rows * width);
  s.sequence->allGather(x, out, s.local * width);
  return out;
}

float* reduceToShards(kernels::Accelerator& acc, float* partial, kernels::DeviceArray<float>& local,
                      const BlockShape& s, size_t width, Communicator* model) {
  if (s.sequence) {
    float* out = sized(acc, local, s.local * width);
    s.sequence->reduceScatter(partial, out, s.local * width);
    return out;
  }
  if (model) model->allReduce(partial, s.rows * width);
  return partial;
}

namespace {

// Rank `rank`'s share of one row of `width` columns (each group's part, groups in order): packed
// from the row, or unpacked into it.
void packShare(const float* row, float* share, const std::vector<ColumnGroup>& groups, size_t u,
               size_t rank) {
  for (const ColumnGroup& g : groups) {
    const size_t part = g.width / u;
    std::memcpy(share, row + g.offset + rank * part, part * sizeof(float));
    share += part;
  }
}
void unpackShare(const float* share, float* row, const std::vector<ColumnGroup>& groups, size_t u,
                 size_t rank) {
  for (const ColumnGroup& g : groups) {
    const size_t part = g.width / u;
    std::memcpy(row + g.offset + rank * part, share, part * sizeof(float));
    share += part;
  }
}

// Rank `rank`'s positions of every sample, `share` columns each: a block of samples x seq rows
// copied into the head layout (every position of every sample), or out of it.
void copyPositions(const float* from, float* to, const BlockShape& s, size_t share, size_t rank,
                   bool intoHeads) {
  const size_t run = s.seq * share;
  for (size_t b = 0; b < s.samples; ++b) {
    const size_t block = b * run, heads = (b * s.fullSeq + rank * s.seq) * share;
    std::memcpy(to + (intoHeads ? heads : block), from + (intoHeads ? block : heads),
                run * sizeof(float));
  }
}

}  // namespace

// Both moves send rank j the rows it needs in blocks of samples x seq rows of width / u columns
// (block j of the send buffer for rank j), then unpack block i from rank i.
void toHeadLayout(kernels::Accelerator& acc, const float* rows, float* heads, const BlockShape& s,
                  const std::vector<ColumnGroup>& groups, size_t width,
                  kernels::DeviceArray<float>& scratch) {
  const size_t u = static_cast<size_t>(s.ulysses->size());
  const size_t local = s.samples * s.seq, share = width / u, block = local * share;
  float* out = sized(acc, scratch, 2 * u * block);
  float* in = out + u * block;
  for (size_t to = 0; to < u; ++to)  // rank `to`'s heads of every row here
    for (size_t r = 0; r < local; ++r)
      packShare(rows + r * width, out + to * block + r * share, groups, u, to);
  s.ulysses->allToAll(out, in, block);
  for (size_t from = 0; from < u; ++from)  // rank `from` holds positions from * seq.. of each sample
    copyPositions(in + from * block, heads, s, share, from, true);
}

void toPositionLayout(kernels::Accelerator& acc, const float* heads, float* rows,
                      const BlockShape& s, const std::vector<ColumnGroup>& groups, size_t width,
                      kernels::DeviceArray<float>& scratch) {
  const size_t u = static_cast<size_t>(s.ulysses->size());
  const size_t local = s.samples * s.seq, share = width / u, block = local * share;
  float* out = sized(acc, scratch, 2 * u * block);
  float* in = out + u * block;
  for (size_t to = 0; to < u; ++to)  // rank `to`'s positions of every sample, this rank's heads
    copyPositions(heads, out + to * block, s, share, to, false);
  s.ulysses->allToAll(out, in, block);
  for (size_t from = 0; from < u; ++from)  // rank `from` holds heads from * part.. of each group
    for (size_t r = 0; r < local; ++r)
      unpackShare(in + from * block + r * share, rows + r * width, groups, u, from);
}

void ShardedGradients::add(float* grad, size_t count) {
  if (!sequence_ || !grad || count == 0) return;
  tensors_.emplace_back(grad, count);
  saved_.insert(saved_.end(), grad, grad + count);
  std::fill(grad, grad + count, 0.0f);
}

void ShardedGradients::finish() {
  if (tensors_.empty()) return;
  sums_.clear();
  for (const auto& [grad, count] : tensors_) sums_.insert(sums_.end(), grad, grad + count);
  sequence_->allReduce(sums_.data(), sums_.size());
  size_t at = 0;
  for (const auto& [grad, count] : tensors_)
    for (size_t i = 0; i < count; ++i, ++at) grad[i] = saved_[at] + sums_[at];
  tensors_.clear();
  saved_.clear();
}

}  // namespace ds::runtime::gpt
