// Megatron's VocabParallelEmbedding: each model rank holds a contiguous range of the vocabulary's
// rows; a token outside the rank's range looks up zeros, and an all-reduce over the model group
// gives every rank the full embedding. Backward is local (each rank updates its own rows).
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/comm/communicator.h"
#include "runtime/parallel/tensor_slicing.h"

namespace ds::runtime {

// The vocabulary rows a model rank holds: [rows.begin, rows.begin + rows.count) of `total`.
struct VocabSlice {
  size_t total = 0;
  SliceRange rows;
};
// The vocabulary (padded as NeoX pads it) must divide by the model-parallel size.
VocabSlice vocabSlice(size_t vocab, int rank, int size);

// out [rows, dim] = table[ids[r]] for every id, where tableSlice [slice.rows.count, dim] holds
// this rank's rows. An id outside [0, slice.total) is refused (ds::Error), on every rank alike.
void vocabParallelEmbeddingForward(Communicator& model, const VocabSlice& slice,
                                   const float* tableSlice, const int32_t* ids, size_t rows,
                                   size_t dim, float* out);
// dtableSlice[ids[r] - begin] += dout[r] for the ids this rank holds, rows in order.
void vocabParallelEmbeddingBackward(const VocabSlice& slice, const int32_t* ids, size_t rows,
                                    size_t dim, const float* dout, float* dtableSlice);

}  // namespace ds::runtime
