// Megatron's slicing of weights, biases, fused query_key_value and vocabulary among model ranks:
// the slices concatenated back in rank order are the full tensor, every rank holds whole heads,
// and sizes that do not divide by model-parallel-size are refused with a message saying so.
#include <catch2/catch.hpp>
#include <numeric>

#include "common/error.h"
#include "runtime/parallel/tensor_slicing.h"
#include "runtime/parallel/vocab_parallel_embedding.h"

using namespace ds;
using namespace ds::runtime;

namespace {

std::vector<float> iota(size_t n) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), 0.0f);  // distinct values: any misplaced element shows
  return v;
}

}  // namespace

TEST_CASE("tensor slicing: column-parallel rows concatenated by rank are the full weight",
          "[tensor_parallel][slicing]") {
  const int size = GENERATE(1, 2, 4);
  const size_t out = 8, in = 6;
  const auto full = iota(out * in);
  std::vector<float> joined, bias;
  const auto fullBias = iota(out);
  for (int r = 0; r < size; ++r) {
    const auto slice = columnParallelWeight(full.data(), out, in, r, size);
    REQUIRE(slice.size() == out / size * in);
    joined.insert(joined.end(), slice.begin(), slice.end());
    const auto b = columnParallelBias(fullBias.data(), out, r, size);
    bias.insert(bias.end(), b.begin(), b.end());
  }
  REQUIRE(joined == full);
  REQUIRE(bias == fullBias);
}

TEST_CASE("tensor slicing: row-parallel columns side by side by rank are the full weight",
          "[tensor_parallel][slicing]") {
  const int size = GENERATE(1, 2, 4);
  const size_t out = 5, in = 12, local = in / size;
  const auto full = iota(out * in);
  std::vector<float> joined(out * in, -1.0f);
  for (int r = 0; r < size; ++r) {
    const auto slice = rowParallelWeight(full.data(), out, in, r, size);
    REQUIRE(slice.size() == out * local);
    for (size_t o = 0; o < out; ++o)
      for (size_t i = 0; i < local; ++i) joined[o * in + r * local + i] = slice[o * local + i];
  }
  REQUIRE(joined == full);
}

TEST_CASE("tensor slicing: query_key_value rows hold whole heads as [q | k | v] per rank",
          "[tensor_parallel][slicing]") {
  const int size = GENERATE(1, 2, 4);
  const int heads = 8;
  const int kvHeads = GENERATE(8, 4);  // multi-head and grouped-query
  const size_t headDim = 3, in = 5;
  const size_t qRows = heads * headDim, kvRows = kvHeads * headDim;
  const auto full = iota((qRows + 2 * kvRows) * in);
  // Each rank's q part, then its k part, then its v part, appended per part across ranks, must
  // rebuild the one-rank [q | k | v].
  std::vector<float> q, k, v;
  for (int r = 0; r < size; ++r) {
    const HeadSlice heads_ = attentionHeadSlice(heads, kvHeads, r, size);
    REQUIRE(heads_.heads == static_cast<size_t>(heads / size));
    REQUIRE(heads_.kvHeads == static_cast<size_t>(kvHeads / size));
    REQUIRE(heads_.firstHead == static_cast<size_t>(r * heads / size));
    const auto slice = qkvParallelWeight(full.data(), heads, kvHeads, headDim, in, r, size);
    const size_t qLocal = heads_.heads * headDim * in, kvLocal = heads_.kvHeads * headDim * in;
    REQUIRE(slice.size() == qLocal + 2 * kvLocal);
    q.insert(q.end(), slice.begin(), slice.begin() + qLocal);
    k.insert(k.end(), slice.begin() + qLocal, slice.begin() + qLocal + kvLocal);
    v.insert(v.end(), slice.begin() + qLocal + kvLocal, slice.end());
  }
  std::vector<float> joined = q;
  joined.insert(joined.end(), k.begin(), k.end());
  joined.insert(joined.end(), v.begin(), v.end());
  REQUIRE(joined == full);
  if (size == 1)  // one rank's layout is the full one, so the model runs unchanged on it
    REQUIRE(qkvParallelWeight(full.data(), heads, kvHeads, headDim, in, 0, 1) == full);
}

TEST_CASE("tensor slicing: the vocabulary divides into contiguous ranges by rank",
          "[tensor_parallel][slicing]") {
  const int size = GENERATE(1, 2, 4);
  size_t next = 0;
  for (int r = 0; r < size; ++r) {
    const VocabSlice slice = vocabSlice(64, r, size);
    REQUIRE(slice.total == 64);
    REQUIRE(slice.rows.begin == next);
    REQUIRE(slice.rows.count == static_cast<size_t>(64 / size));
    next += slice.rows.count;
  }
  REQUIRE(next == 64);
}

TEST_CASE("tensor slicing: sizes that do not divide by model-parallel-size are refused",
          "[tensor_parallel][slicing]") {
  const std::vector<float> full(6 * 4, 1.0f);
  REQUIRE_THROWS_WITH(columnParallelWeight(full.data(), 6, 4, 0, 4),
                      Catch::Contains("outputs (6) must divide evenly by model-parallel-size (4)"));
  REQUIRE_THROWS_WITH(rowParallelWeight(full.data(), 4, 6, 0, 4),
                      Catch::Contains("inputs (6) must divide evenly by model-parallel-size (4)"));
  // 8 heads split 4 ways, but NeoX does not replicate kv heads: 2 kv heads cannot.
  REQUIRE_THROWS_WITH(attentionHeadSlice(8, 2, 0, 4),
                      Catch::Contains("num-kv-heads (2) must divide evenly"));
  REQUIRE_THROWS_WITH(attentionHeadSlice(6, 6, 0, 4),
                      Catch::Contains("num-attention-heads (6) must divide evenly"));
  REQUIRE_THROWS_WITH(attentionHeadSlice(8, 3, 0, 1), Catch::Contains("multiple of kv heads"));
  REQUIRE_THROWS_WITH(vocabSlice(50, 1, 4), Catch::Contains("vocabulary size (50)"));
  REQUIRE_THROWS_WITH(evenChunk(8, 2, 2, "x"), Catch::Contains("model rank 2 is outside"));
  REQUIRE_THROWS_AS(evenChunk(8, 0, 3, "x"), Error);
}
