// The "scheduler" block of ds_config.json: the schedule type and its params, typed and validated.
// Parsed by parseSchedulerConfig (called from parseDeepSpeedConfig); JSON stays out of this header.
// Names and defaults are those of the classes in DeepSpeed's deepspeed/runtime/lr_schedules.py.
#pragma once

#include <cstdint>
#include <optional>

namespace ds::runtime {

// DeepSpeed looks schedules up by their exact class name ("WarmupLR", ...).
// NeoxAnnealing is GPT-NeoX's own schedule (lr-decay-style, warmup, min-lr), set by the NeoX config
// reader; a DeepSpeed JSON cannot name it.
enum class SchedulerType { WarmupLr, WarmupDecayLr, WarmupCosineLr, OneCycle, LrRangeTest, NeoxAnnealing };

enum class WarmupType { Log, Linear };

// warmupNumSteps is stored as written (>= 1, as DeepSpeed requires); the schedules apply
// DeepSpeed's max(2, warmup_num_steps).
struct WarmupLrParams {
  double warmupMinLr = 0.0;
  std::optional<double> warmupMaxLr;  // absent: the optimizer's lr (DeepSpeed >= 0.17.2)
  int64_t warmupNumSteps = 1000;
  WarmupType warmupType = WarmupType::Log;
};

struct WarmupDecayLrParams {
  int64_t totalNumSteps = 0;  // required: the parser rejects a config without it
  double warmupMinLr = 0.0;
  double warmupMaxLr = 0.001;  // unlike WarmupLR, a fixed default
  int64_t warmupNumSteps = 1000;
  WarmupType warmupType = WarmupType::Log;
};

// Ratios multiply the optimizer's own lr.
struct WarmupCosineLrParams {
  int64_t totalNumSteps = 0;  // required
  double warmupMinRatio = 0.0;
  int64_t warmupNumSteps = 1000;
  double cosMinRatio = 0.0001;
  WarmupType warmupType = WarmupType::Log;
};

struct OneCycleParams {
  double cycleMinLr = 0.0;  // required
  double cycleMaxLr = 0.0;  // required
  double decayLrRate = 0.0;
  int64_t cycleFirstStepSize = 2000;
  std::optional<int64_t> cycleSecondStepSize;    // absent: cycleFirstStepSize
  int64_t cycleFirstStairCount = 0;              // 0: continuous
  std::optional<int64_t> cycleSecondStairCount;  // absent: cycleFirstStairCount
  int64_t decayStepSize = 0;                     // 0: no decay after the cycle
  bool cycleMomentum = true;
  double cycleMinMom = 0.8;
  double cycleMaxMom = 0.9;
  double decayMomRate = 0.0;
};

struct LrRangeTestParams {
  double lrRangeTestMinLr = 1e-3;
  int64_t lrRangeTestStepSize = 2000;
  double lrRangeTestStepRate = 1.0;
  bool lrRangeTestStaircase = false;
};

// Only the params member named by `type` is meaningful; the others keep their defaults.
enum class LrDecayStyle { Constant, Linear, Cosine };
struct NeoxAnnealingParams {
  double maxLr = 0.0;  // the optimizer's lr
  double minLr = 0.0;
  int64_t warmupIters = 0;  // warmup * decayIters, rounded down
  int64_t decayIters = 1;
  LrDecayStyle style = LrDecayStyle::Linear;
};

struct SchedulerConfig {
  SchedulerType type = SchedulerType::WarmupLr;
  // Every schedule's last_batch_iteration: -1 starts from the beginning. Any other value makes
  // DeepSpeed leave the optimizer's lr (and momentum) untouched until the first step().
  int64_t lastBatchIteration = -1;
  WarmupLrParams warmupLr;
  WarmupDecayLrParams warmupDecayLr;
  WarmupCosineLrParams warmupCosineLr;
  OneCycleParams oneCycle;
  LrRangeTestParams lrRangeTest;
  NeoxAnnealingParams neoxAnnealing;
};

// "WarmupLR", "WarmupDecayLR", "WarmupCosineLR", "OneCycle", "LRRangeTest".
const char* schedulerTypeName(SchedulerType type);

}  // namespace ds::runtime
