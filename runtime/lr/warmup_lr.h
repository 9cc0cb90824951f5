// DeepSpeed's WarmupLR, stepped as DeepSpeed's engine steps it: the optimizer update first, then
// the scheduler. Update 0 uses warmup_min_lr (set by the constructor); update i >= 1 uses the lr
// of scheduler iteration i - 1: min + (max - min) * gamma, where gamma is
// log(iter + 1) / log(warmup_num_steps) ("log") or iter / warmup_num_steps ("linear"), and 1 from
// iter >= warmup_num_steps on. warmup_num_steps is at least 2, as in DeepSpeed.
#pragma once

#include <cstdint>

#include "runtime/config/ds_config.h"

namespace ds::runtime {

class WarmupLr {
 public:
  explicit WarmupLr(const WarmupLrParams& params);

  double lr() const { return lr_; }
  void step();  // after each applied (non-skipped) optimizer update
  int64_t lastIteration() const { return lastIteration_; }

 private:
  double lrAt(int64_t iteration) const;

  WarmupLrParams params_;
  int64_t numSteps_;
  int64_t lastIteration_ = -1;
  double lr_;
};

}  // namespace ds::runtime
