// DeepSpeed's elastic batch computation (compute_elastic_config with its v0.1 and v0.2
// algorithms, ../shared/DEEPSPEED-SEMANTICS.md section 14): the global batch size that many world
// sizes divide, the world sizes that can run it and, for a given world size, the micro-batch and
// gradient accumulation. Same results as DeepSpeed for every valid input; where DeepSpeed crashes
// (TypeError, ZeroDivisionError, ...) a ds::Error that says what to change.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/elastic/elasticity_config.h"

namespace ds::runtime {

struct ElasticBatch {
  int64_t finalBatchSize = 0;
  std::vector<int64_t> validGpus;  // v0.2: data-parallel sizes
  // Set when a world size was given (and is valid): the largest micro-batch size of the config
  // that divides final / world, and final / (micro x world).
  std::optional<int64_t> microBatchSize;
  std::optional<int64_t> gradientAccumulationSteps;
};

// `worldSize` 0: none given; v0.2 then takes `envWorldSize` (the WORLD_SIZE variable, nullptr
// when unset) to choose among its candidates, and the result has no micro-batch. Throws ds::Error.
ElasticBatch computeElasticBatch(const ElasticityConfig& config, int64_t worldSize,
                                 const char* envWorldSize);

// The runtime's elastic batch for a job whose model replica spans model_parallel_size ranks (a
// pipe x model grid; DeepSpeed's mpu): v0.2 on the whole world, counting every rank as section
// 14.4 does, then the world's data-parallel size, world / model_parallel_size, checked against the
// valid data-parallel sizes and given its micro-batch and accumulation (DeepSpeed's runtime would
// compare the data-parallel size with itself divided again, which refuses most such worlds).
// A world that is not whole replicas is refused with the fix. model_parallel_size 1:
// computeElasticBatch(config, worldSize, nullptr). validGpus holds data-parallel sizes.
ElasticBatch elasticReplicaBatch(const ElasticityConfig& config, int64_t worldSize);

// The v0.1 core (also v0.2's, on nodes): the batch and its valid GPU counts; nullopt for the
// counts in DeepSpeed's degenerate case (no candidate has any, prefer_larger_batch false).
struct ElasticV01 {
  int64_t finalBatchSize;
  std::optional<std::vector<int64_t>> validGpus;
};
ElasticV01 elasticV01(const std::vector<int64_t>& microBatches, int64_t maxBatch, int64_t minGpus,
                      int64_t maxGpus, bool preferLarger);

// "[1, 2, 4]": Python's list repr, as DeepSpeed's messages print lists.
std::string pythonList(const std::vector<int64_t>& values);

}  // namespace ds::runtime
