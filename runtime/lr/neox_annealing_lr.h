// GPT-NeoX's AnnealingLR: linear warmup from 0 over warmupIters, then linear, cosine or no decay
// until decayIters, never below min-lr. Update u (0-based) uses lrAt(u - 1)'s value here, i.e.
// NeoX's get_lr() with num_iters = u.
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
