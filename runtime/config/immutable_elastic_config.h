// The "elasticity" block's checks beyond parsing (parseElasticityConfig, config_blocks.h, applies
// DeepSpeed's keys, types and value rules in DeepSpeed's order). The typed block itself lives
// beside the elastic batch computation that consumes it (runtime/elastic/elasticity_config.h).
#pragma once

#include <string>
#include <string_view>

#include "runtime/elastic/elasticity_config.h"

namespace ds::runtime {

// DeepSpeed's ensure_immutable_elastic_config: `schedulerJson` is parsed as an elasticity block
// (with the same defaults and rules as the config's own), and its max_train_batch_size,
// micro_batch_sizes (in order) and version must equal `runtime`'s; nothing else is compared.
// Throws ds::Error "SOURCE: elasticity.KEY: ..." naming DeepSpeed's field
// (max_acceptable_batch_size, micro_batches, version) and both values.
void ensureImmutableElasticConfig(std::string_view schedulerJson, const ElasticityConfig& runtime,
                                  const std::string& source);

// DeepSpeed's runtime check of a config whose elasticity block is enabled: against the block the
// resource scheduler saw, when the environment sets DEEPSPEED_ELASTICITY_CONFIG. Every rank makes
// it; ds-launch, ds-config check and ds-elastic make it first, with the same message.
void checkSchedulerElasticConfig(const ElasticityConfig& config, const std::string& source);

}  // namespace ds::runtime
