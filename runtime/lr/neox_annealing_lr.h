// GPT-NeoX's AnnealingLR: linear warmup from 0 over warmupIters, then linear, cosine or no decay
// until decayIters, never below min-lr. Update u (0-based) uses NeoX's get_lr() at num_iters = u
// (lrAt(u - 1) here), so with warmup the first update has lr 0, as in NeoX.
#pragma once

#include "runtime/lr/iteration_schedule.h"

namespace ds::runtime {

class NeoxAnnealingLr : public IterationSchedule {
 public:
  NeoxAnnealingLr(const NeoxAnnealingParams& params, int64_t lastBatchIteration);

 protected:
  double lrAt(int64_t iteration) const override;

 private:
  NeoxAnnealingParams p_;
};

}  // namespace ds::runtime
