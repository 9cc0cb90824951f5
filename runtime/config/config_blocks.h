// The parsers of the config blocks that live in their own files, called by parseDeepSpeedConfig.
// Each validates its block completely and throws ds::Error naming the JSON path.
#pragma once

#include "runtime/config/json_reader.h"
#include "runtime/config/optimizer_config.h"
#include "runtime/config/scheduler_config.h"

namespace ds::runtime {

OptimizerConfig parseOptimizerConfig(JsonReader& r, const Json& block);
SchedulerConfig parseSchedulerConfig(JsonReader& r, const Json& block);

}  // namespace ds::runtime
