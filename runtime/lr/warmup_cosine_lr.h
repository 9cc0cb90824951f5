// DeepSpeed's WarmupCosineLR: a ratio of the optimizer's own lr, warmed up from warmup_min_ratio to
// 1 over warmup_num_steps (at least 2), then a half cosine down to cos_min_ratio at
// total_num_steps, flat after. Update 0 uses lr 0 (DeepSpeed's constructor runs before the first
// iteration and sets 0.0), update 1 the warmup_min_ratio.
#pragma once

#include "runtime/lr/iteration_schedule.h"

namespace ds::runtime {

class WarmupCosineLr : public IterationSchedule {
 public:
  WarmupCosineLr(const WarmupCosineLrParams& params, int64_t lastBatchIteration, double optimizerLr,
                 double optimizerMomentum);

 protected:
  double lrAt(int64_t iteration) const override;

 private:
  double ratioAt(int64_t iteration) const;

  WarmupCosineLrParams params_;
  int64_t numSteps_;  // max(2, warmup_num_steps)
  double baseLr_;     // the optimizer's lr at construction
};

}  // namespace ds::runtime
