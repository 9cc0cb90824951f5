// Which part of a full (one-rank) tensor each model-parallel rank holds, in Megatron's layout:
// contiguous chunks by model rank, sizes that must divide evenly. Arithmetic and copies only; the
// layers that run on the slices are parallel_linear.h and vocab_parallel_*.h.
#pragma once

#include <cstddef>
#include <vector>

namespace ds::runtime {

// Elements [begin, begin + count) of one axis.
struct SliceRange {
  size_t begin = 0;
  size_t count = 0;
};

// Model rank `rank` of `size`'s contiguous chunk of `total`; `what` names the axis in the error
// when `total` does not divide by `size` ("attention heads", "ffn hidden size", ...).
SliceRange evenChunk(size_t total, int rank, int size, const char* what);

// A linear's weight is [out, in] row-major (y = x W^T + b).
// Column-parallel (output features split): the rank's rows of W and its chunk of b.
std::vector<float> columnParallelWeight(const float* full, size_t out, size_t in, int rank,
                                        int size);
std::vector<float> columnParallelBias(const float* full, size_t out, int rank, int size);
// Row-parallel (input features split): the rank's columns of every row of W, [out, in / size].
// Its bias is not sliced: every rank holds all of it and adds it once, after the all-reduce.
std::vector<float> rowParallelWeight(const float* full, size_t out, size_t in, int rank, int size);

// The attention heads (and grouped-query kv heads) a model rank computes: both counts must
// divide by the model-parallel size, as NeoX requires (it does not replicate kv heads).
struct HeadSlice {
  size_t firstHead = 0, heads = 0;
  size_t firstKvHead = 0, kvHeads = 0;
};
HeadSlice attentionHeadSlice(int heads, int kvHeads, int rank, int size);

// The rows of the fused query_key_value weight (out = (heads + 2 kvHeads) * headDim, one-rank
// layout [q | k | v], heads in order) that a rank holds, in the order it holds them: its q heads,
// then its k heads, then its v heads. That is NeoX's per-partition layout ([np*hn | kvp*hn |
// kvp*hn], split by gqa_project), and at one rank it is the full layout, so the attention code
// runs unchanged on a slice with heads / size and kvHeads / size. (NeoX's MHA path interleaves
// q, k, v per head instead; a rank still holds whole heads either way.)
std::vector<SliceRange> qkvRows(int heads, int kvHeads, size_t headDim, int rank, int size);
// Those rows of the weight [out, in] (a bias is the case in = 1).
std::vector<float> qkvParallelWeight(const float* full, int heads, int kvHeads, size_t headDim,
                                     size_t in, int rank, int size);

// The rows of a [rows, width] tensor listed in `ranges`, concatenated in that order.
std::vector<float> takeRows(const float* full, size_t width, const std::vector<SliceRange>& ranges);

}  // namespace ds::runtime
