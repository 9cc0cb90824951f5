// DeepSpeed's wall_clock_breakdown output from the engine's StepTimes and OptimizerTimes, for every
// trainer: the timer names in DeepSpeed's order and its "time (ms) | name: value" line. When and on
// which ranks a trainer prints a line is the trainer's business; the monitors' events use the
// names.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "runtime/engine/engine.h"

namespace ds::runtime {

struct TimerValue {
  const char* name;  // DeepSpeed's timer name, also the monitor event's elapsed_time_ms_<name>
  double ms;
};

std::array<TimerValue, 4> stepTimers(const StepTimes& times);
// The timers DeepSpeed's ZeRO optimizer logs after an update: empty at stage 0 (no ZeRO optimizer)
// and after a step skipped on overflow (DeepSpeed logs none then). DeepSpeed never sends these to
// the monitors.
std::vector<TimerValue> optimizerTimers(const OptimizerTimes& times);
// DeepSpeed's SynchronizedWallClockTimer.log line, without a newline.
std::string timerLine(const StepTimes& times);
std::string timerLine(const std::vector<TimerValue>& timers);

}  // namespace ds::runtime
