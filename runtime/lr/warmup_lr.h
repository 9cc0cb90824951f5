// DeepSpeed's WarmupLR: from warmup_min_lr up to warmup_max_lr over warmup_num_steps (at least 2),
// then flat. Update 0 and update 1 both use warmup_min_lr (constructor, then iteration 0 whose
// gamma is log(1) = 0 or 0 / n): DeepSpeed's oddity, kept.
#pragma once

#include "runtime/lr/iteration_schedule.h"

namespace ds::runtime {

// The warmup fraction shared by WarmupLR, WarmupDecayLR and WarmupCosineLR for
// 0 <= iteration < numSteps: log(iteration + 1) / log(numSteps) (computed as DeepSpeed does, via
// the precomputed inverse, so values match to the bit) or iteration / numSteps.
double warmupGamma(WarmupType type, int64_t iteration, int64_t numSteps);

class WarmupLr : public IterationSchedule {
 public:
  // maxLr: params.warmupMaxLr, or the optimizer's lr when the config leaves it out.
  WarmupLr(const WarmupLrParams& params, int64_t lastBatchIteration, double optimizerLr,
           double optimizerMomentum);

 protected:
  double lrAt(int64_t iteration) const override;

 private:
  double minLr_;
  double deltaLr_;
  int64_t numSteps_;
  WarmupType type_;
};

}  // namespace ds::runtime
