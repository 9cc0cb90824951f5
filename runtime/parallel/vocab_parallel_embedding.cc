// The masked local lookup plus one all-reduce; the sum is exact (one rank adds the row, the
// others zeros), so every rank gets the one-rank embedding bit for bit.
#include "runtime/parallel/vocab_parallel_embedding.h"

#include <algorithm>
#include <string>

#include "common/error.h"

namespace ds::runtime {
namespace {

bool owns(const VocabSlice& slice, int32_t id) {
  const auto at = static_cast<size_t>(id);
  return id >= 0 && at >= slice.rows.begin && at < slice.rows.begin + slice.rows.count;
}

}  // namespace

VocabSlice vocabSlice(size_t vocab, int rank, int size) {
  return {vocab, evenChunk(vocab, rank, size, "the (padded) vocabulary size")};
}

void vocabParallelEmbeddingForward(Communicator& model, const VocabSlice& slice,
                                   const float* tableSlice, const int32_t* ids, size_t rows,
                                   size_t dim, float* out) {
  for (size_t r = 0; r < rows; ++r) {
    if (ids[r] < 0 || static_cast<size_t>(ids[r]) >= slice.total)
      throw Error("vocab-parallel embedding: token id " + std::to_string(ids[r]) + " at row " +
                  std::to_string(r) + " is outside the vocabulary of " +
                  std::to_string(slice.total));
    float* o = out + r * dim;
    if (owns(slice, ids[r]))
      std::copy_n(tableSlice + (static_cast<size_t>(ids[r]) - slice.rows.begin) * dim, dim, o);
    else
      std::fill_n(o, dim, 0.0f);
  }
  model.allReduce(out, rows * dim);
}

void vocabParallelEmbeddingBackward(const VocabSlice& slice, const int32_t* ids, size_t rows,
                                    size_t dim, const float* dout, float* dtableSlice) {
  for (size_t r = 0; r < rows; ++r) {
    if (!owns(slice, ids[r])) continue;
    float* d = dtableSlice + (static_cast<size_t>(ids[r]) - slice.rows.begin) * dim;
    const float* g = dout + r * dim;
    for (size_t i = 0; i < dim; ++i) d[i] += g[i];
  }
}

}  // namespace ds::runtime
