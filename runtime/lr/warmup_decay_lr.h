// DeepSpeed's WarmupDecayLR: WarmupLR's warmup (warmup_max_lr defaults to 0.001 here, not to the
// optimizer's lr), then a linear decay that reaches 0 at total_num_steps and stays there.
#pragma once

#include "runtime/lr/iteration_schedule.h"

namespace ds::runtime {

class WarmupDecayLr : public IterationSchedule {
 public:
  WarmupDecayLr(const WarmupDecayLrParams& params, int64_t lastBatchIteration, double optimizerLr,
                double optimizerMomentum);

 protected:
  double lrAt(int64_t iteration) const override;

 private:
  WarmupDecayLrParams params_;
  int64_t numSteps_;  // max(2, warmup_num_steps)
};

}  // namespace ds::runtime
