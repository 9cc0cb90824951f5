// LRRangeTest: see the header.
#include "runtime/lr/lr_range_test.h"

#include <cmath>

namespace ds::runtime {

LrRangeTest::LrRangeTest(const LrRangeTestParams& params, int64_t lastBatchIteration,
                         double optimizerLr, double optimizerMomentum)
    : params_(params) {
  if (params.lrRangeTestStepSize < 1) {
    throw Error("LRRangeTest: lr_range_test_step_size must be >= 1, got " +
                std::to_string(params.lrRangeTestStepSize));
  }
  start(lastBatchIteration, optimizerLr, optimizerMomentum);
}

double LrRangeTest::lrAt(int64_t iteration) const {
  double interval =
      static_cast<double>(iteration + 1) / static_cast<double>(params_.lrRangeTestStepSize);
  if (params_.lrRangeTestStaircase) interval = std::floor(interval);
  return params_.lrRangeTestMinLr * (1.0 + params_.lrRangeTestStepRate * interval);
}

}  // namespace ds::runtime
