// Batch-size inference: fills in whichever of train_batch_size, train_micro_batch_size_per_gpu and
// gradient_accumulation_steps the config left out, exactly as DeepSpeed does, then checks them.
// Does not read JSON and does not apply elasticity (that overrides the batch keys elsewhere).
#pragma once

#include <cstdint>
#include <optional>

#include "runtime/parallel/topology.h"

namespace ds::runtime {

struct BatchConfig {
  int64_t trainBatchSize;
  int64_t microBatchPerGpu;
  int64_t gradientAccumulationSteps;
};

// DeepSpeed's _set_batch_related_parameters followed by _batch_assertion
// (DEEPSPEED-SEMANTICS.md 15.3/15.4), with Python floor division. nullopt = key absent or null.
// Throws ds::Error with DeepSpeed's meaning and the computed numbers; a zero divisor (a
// ZeroDivisionError in DeepSpeed) names the key that is zero.
BatchConfig inferBatchSizes(std::optional<int64_t> train, std::optional<int64_t> micro,
                            std::optional<int64_t> gas, int64_t worldSize);

// DeepSpeed's case with an mpu (config.py:709-727, DEEPSPEED-SEMANTICS.md 15.1): the rules divide
// by the mpu's data-parallel world size, world / (pipe x model), not by the world: the ranks of
// one pipeline and its tensor slices share each micro-batch.
BatchConfig inferBatchSizes(std::optional<int64_t> train, std::optional<int64_t> micro,
                            std::optional<int64_t> gas, const PipeModelDataTopology& topology);

}  // namespace ds::runtime
