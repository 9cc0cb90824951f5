// DeepSpeed's OneCycle: lr rises from cycle_min_lr to cycle_max_lr over cycle_first_step_size
// updates and falls back over cycle_second_step_size (optionally in stairs), then stays at
// cycle_min_lr or decays as cycle_min_lr / (1 + decay_lr_rate * t / decay_step_size). With
// cycle_momentum, momentum moves inversely between cycle_max_mom and cycle_min_mom, then stays at
// cycle_max_mom or grows as cycle_max_mom * (1 + decay_mom_rate * t / decay_step_size).
// DeepSpeed's oddities kept: update 0 uses cycle_min_mom (the constructor's value) where the cycle
// formula gives cycle_max_mom. While cycling, DeepSpeed writes betas = (momentum, 0.99), so the
// engine also sets Adam's / Lamb's beta2 to LrSchedule::kCycledBeta2 for the whole run.
#pragma once

#include "runtime/lr/iteration_schedule.h"

namespace ds::runtime {

class OneCycle : public IterationSchedule {
 public:
  OneCycle(const OneCycleParams& params, int64_t lastBatchIteration, double optimizerLr,
           double optimizerMomentum);

 protected:
  double lrAt(int64_t iteration) const override;
  std::optional<double> momentumAt(int64_t iteration) const override;

 private:
  // Position in the cycle: 0 at cycle_min_lr, 1 at the peak.
  double scaleFactor(int64_t iteration) const;
  // t of the decay formulas, or -1 while the cycle runs.
  double decayIteration(int64_t iteration) const;

  OneCycleParams params_;
  double firstSize_, secondSize_, totalSize_, stepRatio_;
  int64_t firstStairs_, secondStairs_;
  bool decayLr_, decayMom_;
};

}  // namespace ds::runtime
