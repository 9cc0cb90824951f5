// The "scheduler" block of ds_config.json: type and params, typed and validated.
// Parsed by parseSchedulerConfig (called from parseDeepSpeedConfig); JSON stays out of this header.
#pragma once

#include <cstdint>

namespace ds::runtime {

enum class WarmupType { Log, Linear };

// DeepSpeed's WarmupLR defaults. warmupNumSteps is stored as written: DeepSpeed's scheduler
// uses max(2, warmup_num_steps), and applying that is the scheduler's job.
struct WarmupLrParams {
  double warmupMinLr = 0.0;
  double warmupMaxLr = 0.001;
  int64_t warmupNumSteps = 1000;
  WarmupType warmupType = WarmupType::Log;
};

struct SchedulerConfig {
  WarmupLrParams warmupLr;  // WarmupLR is the only scheduler implemented so far
};

}  // namespace ds::runtime
