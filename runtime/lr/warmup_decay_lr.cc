// WarmupDecayLR: see the header.
#include "runtime/lr/warmup_decay_lr.h"

#include <algorithm>

#include "runtime/lr/warmup_lr.h"

namespace ds::runtime {

WarmupDecayLr::WarmupDecayLr(const WarmupDecayLrParams& params, int64_t lastBatchIteration,
                             double optimizerLr, double optimizerMomentum)
    : params_(params), numSteps_(std::max<int64_t>(2, params.warmupNumSteps)) {
  if (params.warmupNumSteps < 1) {
    throw Error("WarmupDecayLR: warmup_num_steps must be >= 1, got " +
                std::to_string(params.warmupNumSteps));
  }
  start(lastBatchIteration, optimizerLr, optimizerMomentum);
}

double WarmupDecayLr::lrAt(int64_t iteration) const {
  if (iteration < 0) return params_.warmupMinLr;
  double gamma;
  if (iteration < numSteps_) {
    gamma = warmupGamma(params_.warmupType, iteration, numSteps_);
  } else {
    // (total - it) / max(1, total - warmup), floored at 0.
    const double remaining = static_cast<double>(params_.totalNumSteps - iteration);
    const double span = std::max(1.0, static_cast<double>(params_.totalNumSteps - numSteps_));
    gamma = std::max(0.0, remaining / span);
  }
  return params_.warmupMinLr + (params_.warmupMaxLr - params_.warmupMinLr) * gamma;
}

}  // namespace ds::runtime
