// DeepSpeed's LRRangeTest: lr = lr_range_test_min_lr * (1 + step_rate * interval), where interval
// is (iteration + 1) / step_size, floored when lr_range_test_staircase is set. Grows without bound:
// it is for finding the largest stable lr, not for training runs.
#pragma once

#include "runtime/lr/iteration_schedule.h"

namespace ds::runtime {

class LrRangeTest : public IterationSchedule {
 public:
  LrRangeTest(const LrRangeTestParams& params, int64_t lastBatchIteration, double optimizerLr,
              double optimizerMomentum);

 protected:
  double lrAt(int64_t iteration) const override;

 private:
  LrRangeTestParams params_;
};

}  // namespace ds::runtime
