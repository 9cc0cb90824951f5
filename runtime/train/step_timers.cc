#include "runtime/train/step_timers.h"

#include <cstdio>

namespace ds::runtime {

std::array<TimerValue, 4> stepTimers(const StepTimes& t) {
  // backward_allreduce is the stage's gradient reduction at the accumulation boundary, whatever
  // the collective (DeepSpeed keeps the name): stage 0 all-reduces, stage 1 reduce-scatters there,
  // stages 2 and 3 wait for the reduce-scatters issued during backward (timed in backward).
  return {{{"forward", t.forwardMs},
           {"backward", t.backwardMs},
           {"backward_allreduce", t.allreduceMs},
           {"step", t.stepMs}}};
}

std::vector<TimerValue> optimizerTimers(const OptimizerTimes& t) {
  std::vector<TimerValue> timers;
  if (!t.applied || t.stage == 0) return timers;
  if (t.stage < 3) {
    // Stages 1-2 (DeepSpeed's stage_1_and_2.py): its three timers in its order; the gradients'
    // share includes the unscale and clip, the step's the 16-bit copy of the master.
    timers = {{"optimizer_allgather", t.allgatherMs},
              {"optimizer_gradients", t.gradientsMs},
              {"optimizer_step", t.updateMs}};
  } else {
    // Stage 3 (stage3.py): optimizer_step spans the whole sub-group loop, swaps included.
    timers = {{"optimizer_step", t.loopMs}};
  }
  // DeepSpeed swaps optimizer states at stage 3 only; here nvme is an axis of every stage.
  if (t.statesSwapped) {
    timers.push_back({"optimizer_swap_in_state", t.swapInMs});
    timers.push_back({"optimizer_swap_out_state", t.swapOutMs});
  }
  // This project's names: DeepSpeed does not time the parameter swapper.
  if (t.paramsSwapped) {
    timers.push_back({"param_swap_in", t.paramSwapInMs});
    timers.push_back({"param_swap_out", t.paramSwapOutMs});
  }
  return timers;
}

std::string timerLine(const std::vector<TimerValue>& timers) {
  std::string line = "time (ms)";
  char field[80];
  for (const TimerValue& timer : timers) {
    std::snprintf(field, sizeof(field), " | %s: %.2f", timer.name, timer.ms);
    line += field;
  }
  return line;
}

std::string timerLine(const StepTimes& times) {
  const std::array<TimerValue, 4> timers = stepTimers(times);
  return timerLine(std::vector<TimerValue>(timers.begin(), timers.end()));
}

}  // namespace ds::runtime
