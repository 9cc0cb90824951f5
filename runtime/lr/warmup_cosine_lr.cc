// WarmupCosineLR: see the header.
#include "runtime/lr/warmup_cosine_lr.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "runtime/lr/warmup_lr.h"

namespace ds::runtime {

WarmupCosineLr::WarmupCosineLr(const WarmupCosineLrParams& params, int64_t lastBatchIteration,
                               double optimizerLr, double optimizerMomentum)
    : params_(params),
      numSteps_(std::max<int64_t>(2, params.warmupNumSteps)),
      baseLr_(optimizerLr) {
  if (params.warmupNumSteps < 1) {
    throw Error("WarmupCosineLR: warmup_num_steps must be >= 1, got " +
                std::to_string(params.warmupNumSteps));
  }
  start(lastBatchIteration, optimizerLr, optimizerMomentum);
}

double WarmupCosineLr::ratioAt(int64_t iteration) const {
  if (iteration < numSteps_) {
    const double gamma = warmupGamma(params_.warmupType, iteration, numSteps_);
    return params_.warmupMinRatio + gamma * (1.0 - params_.warmupMinRatio);
  }
  const double done = static_cast<double>(iteration - numSteps_ + 1);
  const double span = static_cast<double>(std::max<int64_t>(1, params_.totalNumSteps - numSteps_));
  // Clamped: past total_num_steps the ratio stays at cos_min_ratio instead of rising again.
  const double progress = std::min(1.0, done / span);
  const double cosine = (1.0 + std::cos(std::numbers::pi * progress)) / 2.0;
  return std::max(0.0, params_.cosMinRatio + (1.0 - params_.cosMinRatio) * cosine);
}

double WarmupCosineLr::lrAt(int64_t iteration) const {
  if (iteration < 0) return 0.0;
  return baseLr_ * ratioAt(iteration);
}

}  // namespace ds::runtime
