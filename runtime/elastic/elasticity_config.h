// The "elasticity" block as typed values (DeepSpeed's keys and defaults): the input of the elastic
// batch computation. Parsed by runtime/config/config_blocks.h (parseElasticityConfig); holding one
// does not make a job elastic.
#pragma once

#include <cstdint>
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

}  // namespace ds::runtime
