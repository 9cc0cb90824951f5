#include "worker/step_timers.h"

#include <cstdio>

namespace ds::worker {

std::array<TimerValue, 4> stepTimers(const runtime::StepTimes& t) {
  // backward_allreduce is the stage's gradient reduction at the accumulation boundary, whatever
  // the collective (DeepSpeed keeps the name): stage 0 all-reduces, stage 1 reduce-scatters there,
  // stages 2 and 3 wait for the reduce-scatters issued during backward (timed in backward).
  return {{{"forward", t.forwardMs},
           {"backward", t.backwardMs},
           {"backward_allreduce", t.allreduceMs},
           {"step", t.stepMs}}};
}

std::string timerLine(const runtime::StepTimes& times) {
  std::string line = "time (ms)";
  char field[64];
  for (const TimerValue& timer : stepTimers(times)) {
    std::snprintf(field, sizeof(field), " | %s: %.2f", timer.name, timer.ms);
    line += field;
  }
  return line;
}

}  // namespace ds::worker
