// The parsers of the config blocks that live in their own files, called by parseDeepSpeedConfig.
// Each validates its block completely and throws ds::Error naming the JSON path.
#pragma once

#include "runtime/config/json_reader.h"
#include "runtime/config/optimizer_config.h"
#include "runtime/config/precision_config.h"
#include "runtime/config/scheduler_config.h"
#include "runtime/config/zero_config.h"

namespace ds::runtime {

OptimizerConfig parseOptimizerConfig(JsonReader& r, const Json& block);
SchedulerConfig parseSchedulerConfig(JsonReader& r, const Json& block);
// knownKeys: every key DeepSpeedZeroConfig accepts (unknown ones only warn).
ZeroConfig parseZeroConfig(JsonReader& r, const Json& block,
                           const std::vector<std::string_view>& knownKeys);
// Reads fp16 / bf16 / amp / data_types / communication_data_type / prescale_gradients /
// gradient_predivide_factor from the top-level object.
PrecisionConfig parsePrecisionConfig(JsonReader& r, const Json& root, int zeroStage);

}  // namespace ds::runtime
