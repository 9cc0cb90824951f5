// The "elasticity" block with DeepSpeed's keys, types, defaults and validation rules (checked in
// DeepSpeed's order, first failure wins). This is the input of the elastic batch computation;
// parsing it does not make a job elastic.
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

}  // namespace ds::runtime
