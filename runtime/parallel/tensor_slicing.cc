// Megatron's even, contiguous-by-rank slicing of weights, biases and attention heads.
#include "runtime/parallel/tensor_slicing.h"

#include <string>

#include "common/error.h"

namespace ds::runtime {

SliceRange evenChunk(size_t total, int rank, int size, const char* what) {
  if (size < 1 || rank < 0 || rank >= size)
    throw Error(std::string("tensor slicing: model rank ") + std::to_string(rank) +
                " is outside a model-parallel group of " + std::to_string(size));
  const auto parts = static_cast<size_t>(size);
  if (total % parts != 0)
    throw Error(std::string("tensor slicing: ") + what + " (" + std::to_string(total) +
                ") must divide evenly by model-parallel-size (" + std::to_string(size) +
                "); choose sizes that are a multiple of it");
  const size_t count = total / parts;
  return {static_cast<size_t>(rank) * count, count};
}

std::vector<float> takeRows(const float* full, size_t width,
                            const std::vector<SliceRange>& ranges) {
  size_t rows = 0;
  for (const SliceRange& range : ranges) rows += range.count;
  std::vector<float> out;
  out.reserve(rows * width);
  for (const SliceRange& range : ranges)
    out.insert(out.end(), full + range.begin * width, full + (range.begin + range.count) * width);
  return out;
}

std::vector<float> columnParallelWeight(const float* full, size_t out, size_t in, int rank,
                                        int size) {
  return takeRows(full, in, {evenChunk(out, rank, size, "a column-parallel linear's outputs")});
}

std::vector<float> columnParallelBias(const float* full, size_t out, int rank, int size) {
  return columnParallelWeight(full, out, 1, rank, size);
}

std::vector<float> rowParallelWeight(const float* full, size_t out, size_t in, int rank, int size) {
  const SliceRange cols = evenChunk(in, rank, size, "a row-parallel linear's inputs");
  std::vector<float> slice;
  slice.reserve(out * cols.count);
  for (size_t r = 0; r < out; ++r)
    slice.insert(slice.end(), full + r * in + cols.begin, full + r * in + cols.begin + cols.count);
  return slice;
}

HeadSlice attentionHeadSlice(int heads, int kvHeads, int rank, int size) {
  if (heads < 1 || kvHeads < 1 || heads % kvHeads != 0)
    throw Error("tensor slicing: " + std::to_string(heads) + " attention heads cannot share " +
                std::to_string(kvHeads) + " kv heads (heads must be a multiple of kv heads)");
  const SliceRange q = evenChunk(static_cast<size_t>(heads), rank, size, "num-attention-heads");
  const SliceRange kv = evenChunk(static_cast<size_t>(kvHeads), rank, size, "num-kv-heads");
  return {q.begin, q.count, kv.begin, kv.count};
}

std::vector<SliceRange> qkvRows(int heads, int kvHeads, size_t headDim, int rank, int size) {
  const HeadSlice slice = attentionHeadSlice(heads, kvHeads, rank, size);
  const size_t qRows = static_cast<size_t>(heads) * headDim;
  const size_t kvRows = static_cast<size_t>(kvHeads) * headDim;
  return {{slice.firstHead * headDim, slice.heads * headDim},
          {qRows + slice.firstKvHead * headDim, slice.kvHeads * headDim},
          {qRows + kvRows + slice.firstKvHead * headDim, slice.kvHeads * headDim}};
}

std::vector<float> qkvParallelWeight(const float* full, int heads, int kvHeads, size_t headDim,
                                     size_t in, int rank, int size) {
  return takeRows(full, in, qkvRows(heads, kvHeads, headDim, rank, size));
}

}  // namespace ds::runtime
