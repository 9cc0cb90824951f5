// The parsers of the config blocks that live in their own files, called by parseDeepSpeedConfig.
// Each validates its block completely and throws ds::Error naming the JSON path.
#pragma once

#include "runtime/config/autotuning_config.h"
#include "runtime/config/config_policy.h"
#include "runtime/config/immutable_elastic_config.h"
#include "runtime/config/json_reader.h"
#include "runtime/config/optimizer_config.h"
#include "runtime/config/precision_config.h"
#include "runtime/config/scheduler_config.h"
#include "runtime/config/zero_config.h"

namespace ds::runtime {

OptimizerConfig parseOptimizerConfig(JsonReader& r, const Json& block);
// Type and range of every key, unknown keys warned; "auto" values are the caller's.
AutotuningConfig parseAutotuningConfig(JsonReader& r, const Json& block);
ElasticityConfig parseElasticityConfig(JsonReader& r, const Json& block);
// Type-checks every key of the policy table the config sets, refuses features that are switched on
// but not implemented, warns for missing observers; returns the verdict for each key present.
std::vector<KeyVerdict> applyConfigPolicy(JsonReader& r, const Json& root);
SchedulerConfig parseSchedulerConfig(JsonReader& r, const Json& block);
// knownKeys: every key DeepSpeedZeroConfig accepts (unknown ones only warn).
ZeroConfig parseZeroConfig(JsonReader& r, const Json& block,
                           const std::vector<std::string_view>& knownKeys);
// Reads fp16 / bf16 / amp / data_types / communication_data_type / prescale_gradients /
// gradient_predivide_factor from the top-level object.
PrecisionConfig parsePrecisionConfig(JsonReader& r, const Json& root, int zeroStage);

}  // namespace ds::runtime
