// Megatron's vocab-parallel cross-entropy: each model rank holds the logits of its vocabulary
// range (a column-parallel output layer's output) and the loss is formed without gathering them:
// the row maxima and sums of exponentials are all-reduced, the target logit comes from the rank
// that owns it, and the gradient is then local.
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/comm/communicator.h"
#include "runtime/parallel/vocab_parallel_embedding.h"

namespace ds::runtime {

// logitsSlice [rows, slice.rows.count]: this rank's columns of the logits. Returns the sum of the
// rows' losses (the same on every model rank) and overwrites logitsSlice with
// d(sum_loss * gradScale) / d(logitsSlice), as kernels' crossEntropy does for the full logits.
// A negative target masks its row (NeoX's label -100): no loss, a zero gradient row. A target at
// or past slice.total is refused (ds::Error).
double vocabParallelCrossEntropy(Communicator& model, const VocabSlice& slice, float* logitsSlice,
                                 const int32_t* targets, size_t rows, float gradScale);

}  // namespace ds::runtime
