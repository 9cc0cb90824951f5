// WarmupLR: see the header for the schedule and DeepSpeed's stepping order.
#include "runtime/lr/warmup_lr.h"

#include <algorithm>
#include <cmath>

namespace ds::runtime {

WarmupLr::WarmupLr(const WarmupLrParams& params)
    : params_(params),
      numSteps_(std::max<int64_t>(2, params.warmupNumSteps)),
      lr_(params.warmupMinLr) {}

double WarmupLr::lrAt(int64_t iteration) const {
  double gamma = 1.0;
  if (iteration < numSteps_) {
    gamma = params_.warmupType == WarmupType::Log
                ? std::log(static_cast<double>(iteration + 1)) /
                      std::log(static_cast<double>(numSteps_))
                : static_cast<double>(iteration) / static_cast<double>(numSteps_);
  }
  return params_.warmupMinLr + (params_.warmupMaxLr - params_.warmupMinLr) * gamma;
}

void WarmupLr::step() {
  ++lastIteration_;
  lr_ = lrAt(lastIteration_);
}

}  // namespace ds::runtime
