// The "elasticity" block with DeepSpeed's keys, types, defaults and validation rules (checked in
// DeepSpeed's order, first failure wins). This is the input of the elastic batch computation;
// parsing it does not make a job elastic.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ds::runtime {

struct ElasticityConfig {
  bool enabled = false;
  int64_t maxTrainBatchSize = 2000;
  std::vector<int64_t> microBatchSizes = {2, 4, 6};
  int64_t minGpus = 1;
  int64_t maxGpus = 10000;
  int64_t minTime = 0;
  double version = 0.2;  // DeepSpeed's latest elasticity version is the default
  bool preferLargerBatch = true;
  bool ignoreNonElasticBatchInfo = false;
  int64_t numGpusPerNode = 1;
  int64_t modelParallelSize = 1;
};

// DeepSpeed's variable for the elasticity block the resource scheduler saw (JSON text). ds-launch
// sets it for a job whose config enables elasticity, unless a scheduler above it already did.
inline constexpr const char* kElasticityConfigVariable = "DEEPSPEED_ELASTICITY_CONFIG";

// DeepSpeed's ensure_immutable_elastic_config: `schedulerJson` is parsed as an elasticity block
// (with the same defaults and rules as the config's own), and its max_train_batch_size,
// micro_batch_sizes (in order) and version must equal `runtime`'s; nothing else is compared.
// Throws ds::Error "SOURCE: elasticity.KEY: ..." naming DeepSpeed's field
// (max_acceptable_batch_size, micro_batches, version) and both values.
void ensureImmutableElasticConfig(std::string_view schedulerJson, const ElasticityConfig& runtime,
                                  const std::string& source);

}  // namespace ds::runtime
