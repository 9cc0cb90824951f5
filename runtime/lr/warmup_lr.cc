// WarmupLR: see the header.
#include "runtime/lr/warmup_lr.h"

#include <algorithm>
#include <cmath>

namespace ds::runtime {

double warmupGamma(WarmupType type, int64_t iteration, int64_t numSteps) {
  if (type == WarmupType::Log) {
    const double inverseLog = 1.0 / std::log(static_cast<double>(numSteps));
    return inverseLog * std::log(static_cast<double>(iteration + 1));
  }
  return static_cast<double>(iteration) / static_cast<double>(numSteps);
}

WarmupLr::WarmupLr(const WarmupLrParams& params, int64_t lastBatchIteration, double optimizerLr,
                   double optimizerMomentum)
    : minLr_(params.warmupMinLr),
      deltaLr_(params.warmupMaxLr.value_or(optimizerLr) - params.warmupMinLr),
      numSteps_(std::max<int64_t>(2, params.warmupNumSteps)),
      type_(params.warmupType) {
  if (params.warmupNumSteps < 1) {
    throw Error("WarmupLR: warmup_num_steps must be >= 1, got " +
                std::to_string(params.warmupNumSteps));
  }
  start(lastBatchIteration, optimizerLr, optimizerMomentum);
}

double WarmupLr::lrAt(int64_t iteration) const {
  if (iteration < 0) return minLr_;
  const double gamma = iteration < numSteps_ ? warmupGamma(type_, iteration, numSteps_) : 1.0;
  return minLr_ + deltaLr_ * gamma;
}

}  // namespace ds::runtime
