// Fuzz target: a DeepSpeed JSON config (--deepspeed_config, a worker's config_json) through
// parseDeepSpeedConfig, for a one-rank job and for an 8-rank job of 2-rank replicas (the batch
// and elasticity rules depend on the world), and the elasticity block as ds-elastic reads it.
#include "common/error.h"
#include "fuzz/fuzz_target.h"
#include "runtime/config/ds_config.h"

namespace ds::fuzz {
namespace {

void fuzzDsConfig(std::string_view input) {
  const std::string source = "fuzz/ds_config.json";
  for (const auto& [world, replica] : {std::pair<int64_t, int64_t>{1, 1}, {8, 2}}) {
    try {
      const runtime::DeepSpeedConfig config =
          runtime::parseDeepSpeedConfig(input, world, source, replica);
      // DeepSpeed's batch assertion, which every accepted config must pass.
      const runtime::BatchConfig& b = config.batch;
      DS_FUZZ_CHECK(b.microBatchPerGpu > 0 && b.gradientAccumulationSteps > 0);
      DS_FUZZ_CHECK(b.trainBatchSize == b.microBatchPerGpu * b.gradientAccumulationSteps * world);
    } catch (const Error&) {
    }
  }
  (void)runtime::readElasticityConfig(input, source);
}

}  // namespace

DS_FUZZ_TARGET(ds_config, fuzzDsConfig);

}  // namespace ds::fuzz
