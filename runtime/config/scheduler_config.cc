// Parses and validates the "scheduler" block; errors name the JSON path.
#include "runtime/config/scheduler_config.h"

#include "runtime/config/config_blocks.h"

namespace ds::runtime {
namespace {

const std::vector<std::string_view> kWarmupLrKeys = {
    "warmup_min_lr", "warmup_max_lr", "warmup_num_steps", "warmup_type", "last_batch_iteration"};

const std::vector<std::string_view> kSchedulerKeys = {"type", "params"};

}  // namespace

SchedulerConfig parseSchedulerConfig(JsonReader& r, const Json& block) {
  r.object(block, "scheduler");
  r.warnUnknownKeys(block, "scheduler", kSchedulerKeys);
  const Json* type = JsonReader::member(block, "type");
  if (!type) r.fail("scheduler.type", "missing (supported: \"WarmupLR\")");
  // DeepSpeed looks scheduler classes up by exact (case-sensitive) name.
  const std::string name = r.string(*type, "scheduler.type");
  if (name != "WarmupLR") {
    r.fail("scheduler.type", "\"" + name + "\" is not supported yet (supported: \"WarmupLR\")");
  }
  SchedulerConfig out;
  WarmupLrParams& p = out.warmupLr;
  const Json* params = JsonReader::member(block, "params");
  if (!params) return out;
  r.object(*params, "scheduler.params");
  r.warnUnknownKeys(*params, "scheduler.params", kWarmupLrKeys);
  r.readNonNegative(*params, "scheduler.params", "warmup_min_lr", p.warmupMinLr);
  r.readNonNegative(*params, "scheduler.params", "warmup_max_lr", p.warmupMaxLr);
  r.readInt(*params, "scheduler.params", "warmup_num_steps", p.warmupNumSteps, 0);
  if (const Json* v = JsonReader::member(*params, "warmup_type")) {
    const std::string t = r.string(*v, "scheduler.params.warmup_type");
    if (t == "log") {
      p.warmupType = WarmupType::Log;
    } else if (t == "linear") {
      p.warmupType = WarmupType::Linear;
    } else {
      r.fail("scheduler.params.warmup_type",
             "expected \"log\" or \"linear\", got " + describeJson(*v));
    }
  }
  int64_t lastBatchIteration = -1;  // only meaningful when resuming; validated, not used
  r.readInt(*params, "scheduler.params", "last_batch_iteration", lastBatchIteration, -1);
  return out;
}

}  // namespace ds::runtime
