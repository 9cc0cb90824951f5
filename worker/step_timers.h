// DeepSpeed's wall_clock_breakdown output from the engine's StepTimes, for every trainer: the
// timer names in DeepSpeed's order and its "time (ms) | name: value" line. When and on which
// ranks a trainer prints the line is the trainer's business; the monitors' events use the names.
#pragma once

#include <array>
#include <string>

#include "runtime/engine/engine.h"

namespace ds::worker {

struct TimerValue {
  const char* name;  // DeepSpeed's timer name, also the monitor event's elapsed_time_ms_<name>
  double ms;
};

std::array<TimerValue, 4> stepTimers(const runtime::StepTimes& times);
// DeepSpeed's SynchronizedWallClockTimer.log line, without a newline.
std::string timerLine(const runtime::StepTimes& times);

}  // namespace ds::worker
