// Parses and validates the "scheduler" block; errors name the JSON path. Unknown params keys are
// errors (a misspelled "warmup_num_step" would silently warm up over 1000 steps). A missing
// "params" block means all defaults, where DeepSpeed itself would crash (scheduler(**None)).
#include "runtime/config/scheduler_config.h"

#include <algorithm>

#include "runtime/config/closest_key.h"
#include "runtime/config/config_blocks.h"

namespace ds::runtime {
namespace {

const char* kPrefix = "scheduler.params";

struct TypeEntry {
  std::string_view name;
  SchedulerType type;
};
const TypeEntry kTypes[] = {{"WarmupLR", SchedulerType::WarmupLr},
                            {"WarmupDecayLR", SchedulerType::WarmupDecayLr},
                            {"WarmupCosineLR", SchedulerType::WarmupCosineLr},
                            {"OneCycle", SchedulerType::OneCycle},
                            {"LRRangeTest", SchedulerType::LrRangeTest}};
const char* kSupported =
    R"((supported: "WarmupLR", "WarmupDecayLR", "WarmupCosineLR", "OneCycle", "LRRangeTest"))";

const std::vector<std::string_view> kSchedulerKeys = {"type", "params"};
const std::vector<std::string_view> kWarmupLrKeys = {
    "warmup_min_lr", "warmup_max_lr", "warmup_num_steps", "warmup_type", "last_batch_iteration"};
const std::vector<std::string_view> kWarmupDecayLrKeys = {
    "total_num_steps",  "warmup_min_lr", "warmup_max_lr",
    "warmup_num_steps", "warmup_type",   "last_batch_iteration"};
const std::vector<std::string_view> kWarmupCosineLrKeys = {
    "total_num_steps", "warmup_min_ratio", "warmup_num_steps",
    "cos_min_ratio",   "warmup_type",      "last_batch_iteration"};
const std::vector<std::string_view> kOneCycleKeys = {"cycle_min_lr",
                                                     "cycle_max_lr",
                                                     "decay_lr_rate",
                                                     "cycle_first_step_size",
                                                     "cycle_second_step_size",
                                                     "cycle_first_stair_count",
                                                     "cycle_second_stair_count",
                                                     "decay_step_size",
                                                     "cycle_momentum",
                                                     "cycle_min_mom",
                                                     "cycle_max_mom",
                                                     "decay_mom_rate",
                                                     "last_batch_iteration"};
const std::vector<std::string_view> kLrRangeTestKeys = {
    "lr_range_test_min_lr", "lr_range_test_step_size", "lr_range_test_step_rate",
    "lr_range_test_staircase", "last_batch_iteration"};

SchedulerType parseType(const JsonReader& r, const Json& block) {
  const Json* type = JsonReader::member(block, "type");
  if (!type) r.fail("scheduler.type", std::string("missing ") + kSupported);
  // DeepSpeed looks schedules up by exact (case-sensitive) class name.
  const std::string name = r.string(*type, "scheduler.type");
  std::vector<std::string_view> names;
  for (const TypeEntry& e : kTypes) {
    if (e.name == name) return e.type;
    names.push_back(e.name);
  }
  std::string message = "\"" + name + "\" is not supported " + kSupported;
  const std::string suggestion = closestKey(name, names);
  if (!suggestion.empty()) message += "; did you mean \"" + suggestion + "\"?";
  r.fail("scheduler.type", message);
}

// WarmupLR, WarmupDecayLR and WarmupCosineLR check warmup_num_steps first: DeepSpeed raises
// "warmup_num_steps must be a positive integer" for anything but an int > 0 (10.0 and 1e3
// included), then uses max(2, warmup_num_steps).
void readWarmup(const JsonReader& r, const Json& params, double* minLr, int64_t& numSteps,
                WarmupType& type) {
  r.readExactInt(params, kPrefix, "warmup_num_steps", numSteps, 1);
  if (minLr) r.readPerGroupNonNegative(params, kPrefix, "warmup_min_lr", *minLr);
  if (const Json* v = JsonReader::member(params, "warmup_type")) {
    const std::string t = r.string(*v, "scheduler.params.warmup_type");
    if (t == "log") {
      type = WarmupType::Log;
    } else if (t == "linear") {
      type = WarmupType::Linear;
    } else {
      // DeepSpeed only warns and falls back to "log"; a typo here should not pass silently.
      r.fail("scheduler.params.warmup_type",
             "expected \"log\" or \"linear\", got " + describeJson(*v));
    }
  }
}

void readRequiredInt(const JsonReader& r, const Json& params, std::string_view key, int64_t& out,
                     int64_t min) {
  if (!JsonReader::member(params, key)) {
    r.fail(joinPath(kPrefix, key), "missing; this schedule has no default for it (an integer >= " +
                                       std::to_string(min) + ")");
  }
  r.readInt(params, kPrefix, key, out, min);
}

void readRequiredPerGroup(const JsonReader& r, const Json& params, std::string_view key,
                          double& out) {
  if (!JsonReader::member(params, key)) {
    r.fail(joinPath(kPrefix, key), "missing; this schedule has no default for it (a number >= 0)");
  }
  r.readPerGroupNonNegative(params, kPrefix, key, out);
}

// DeepSpeed logs the same warning: the decay phase then starts at (or past) its end.
void warnTotalBelowWarmup(JsonReader& r, int64_t total, int64_t warmup) {
  const int64_t effective = std::max<int64_t>(2, warmup);
  if (total < effective) {
    r.warn("scheduler.params.total_num_steps: " + std::to_string(total) +
           " is less than warmup_num_steps " + std::to_string(effective) +
           "; the lr leaves warmup already decayed");
  }
}

void parseOneCycle(const JsonReader& r, const Json& params, OneCycleParams& p) {
  readRequiredPerGroup(r, params, "cycle_min_lr", p.cycleMinLr);
  readRequiredPerGroup(r, params, "cycle_max_lr", p.cycleMaxLr);
  r.readNonNegative(params, kPrefix, "decay_lr_rate", p.decayLrRate);
  r.readInt(params, kPrefix, "cycle_first_step_size", p.cycleFirstStepSize, 1);
  int64_t value = 0;
  if (JsonReader::member(params, "cycle_second_step_size")) {
    r.readInt(params, kPrefix, "cycle_second_step_size", value, 0);
    p.cycleSecondStepSize = value;
  }
  // -1 is DeepSpeed's own argparse default for both stair counts and means no stairs, like 0.
  r.readInt(params, kPrefix, "cycle_first_stair_count", p.cycleFirstStairCount, -1);
  p.cycleFirstStairCount = std::max<int64_t>(0, p.cycleFirstStairCount);
  if (JsonReader::member(params, "cycle_second_stair_count")) {
    r.readInt(params, kPrefix, "cycle_second_stair_count", value, -1);
    p.cycleSecondStairCount = std::max<int64_t>(0, value);
  }
  r.readInt(params, kPrefix, "decay_step_size", p.decayStepSize, 0);
  r.readBool(params, kPrefix, "cycle_momentum", p.cycleMomentum);
  r.readPerGroupNonNegative(params, kPrefix, "cycle_min_mom", p.cycleMinMom);
  r.readPerGroupNonNegative(params, kPrefix, "cycle_max_mom", p.cycleMaxMom);
  // Any sign: after the cycle DeepSpeed multiplies momentum by (1 + rate * interval), so only a
  // negative rate makes it decay.
  r.readNumber(params, kPrefix, "decay_mom_rate", p.decayMomRate);
}

}  // namespace

const char* schedulerTypeName(SchedulerType type) {
  for (const TypeEntry& e : kTypes)
    if (e.type == type) return e.name.data();
  return "?";
}

SchedulerConfig parseSchedulerConfig(JsonReader& r, const Json& block) {
  r.object(block, "scheduler");
  r.warnUnknownKeys(block, "scheduler", kSchedulerKeys);
  SchedulerConfig out;
  out.type = parseType(r, block);
  static const Json kEmpty = Json::object();
  const Json* given = JsonReader::member(block, "params");
  const Json& params = given ? r.object(*given, kPrefix) : kEmpty;

  switch (out.type) {
    case SchedulerType::WarmupLr: {
      WarmupLrParams& p = out.warmupLr;
      r.rejectUnknownKeys(params, kPrefix, kWarmupLrKeys);
      readWarmup(r, params, &p.warmupMinLr, p.warmupNumSteps, p.warmupType);
      double maxLr = 0.0;
      if (JsonReader::member(params, "warmup_max_lr")) {
        r.readPerGroupNonNegative(params, kPrefix, "warmup_max_lr", maxLr);
        p.warmupMaxLr = maxLr;
      }
      break;
    }
    case SchedulerType::WarmupDecayLr: {
      WarmupDecayLrParams& p = out.warmupDecayLr;
      r.rejectUnknownKeys(params, kPrefix, kWarmupDecayLrKeys);
      readRequiredInt(r, params, "total_num_steps", p.totalNumSteps, 1);
      readWarmup(r, params, &p.warmupMinLr, p.warmupNumSteps, p.warmupType);
      r.readPerGroupNonNegative(params, kPrefix, "warmup_max_lr", p.warmupMaxLr);
      warnTotalBelowWarmup(r, p.totalNumSteps, p.warmupNumSteps);
      break;
    }
    case SchedulerType::WarmupCosineLr: {
      WarmupCosineLrParams& p = out.warmupCosineLr;
      r.rejectUnknownKeys(params, kPrefix, kWarmupCosineLrKeys);
      readRequiredInt(r, params, "total_num_steps", p.totalNumSteps, 1);
      readWarmup(r, params, nullptr, p.warmupNumSteps, p.warmupType);
      r.readNonNegative(params, kPrefix, "warmup_min_ratio", p.warmupMinRatio);
      r.readNonNegative(params, kPrefix, "cos_min_ratio", p.cosMinRatio);
      warnTotalBelowWarmup(r, p.totalNumSteps, p.warmupNumSteps);
      break;
    }
    case SchedulerType::OneCycle:
      r.rejectUnknownKeys(params, kPrefix, kOneCycleKeys);
      parseOneCycle(r, params, out.oneCycle);
      break;
    case SchedulerType::LrRangeTest: {
      LrRangeTestParams& p = out.lrRangeTest;
      r.rejectUnknownKeys(params, kPrefix, kLrRangeTestKeys);
      r.readPerGroupNonNegative(params, kPrefix, "lr_range_test_min_lr", p.lrRangeTestMinLr);
      // DeepSpeed: "lr_range_test_step_size must be a positive integer" unless an int > 0.
      r.readExactInt(params, kPrefix, "lr_range_test_step_size", p.lrRangeTestStepSize, 1);
      r.readNumber(params, kPrefix, "lr_range_test_step_rate", p.lrRangeTestStepRate);
      r.readBool(params, kPrefix, "lr_range_test_staircase", p.lrRangeTestStaircase);
      break;
    }
    case SchedulerType::NeoxAnnealing:  // parseType never returns it: no JSON name
      break;
  }
  r.readInt(params, kPrefix, "last_batch_iteration", out.lastBatchIteration, -1);
  return out;
}

}  // namespace ds::runtime
