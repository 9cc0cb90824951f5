// OneCycle: see the header. Arithmetic follows DeepSpeed's order of operations (float sizes,
// float modulo) so values match its to the bit.
#include "runtime/lr/one_cycle.h"

#include <cmath>

namespace ds::runtime {

OneCycle::OneCycle(const OneCycleParams& params, int64_t lastBatchIteration, double optimizerLr,
                   double optimizerMomentum)
    : params_(params),
      firstSize_(static_cast<double>(params.cycleFirstStepSize)),
      secondSize_(
          static_cast<double>(params.cycleSecondStepSize.value_or(params.cycleFirstStepSize))),
      totalSize_(firstSize_ + secondSize_),
      stepRatio_(firstSize_ / totalSize_),
      firstStairs_(params.cycleFirstStairCount),
      secondStairs_(params.cycleSecondStairCount.value_or(params.cycleFirstStairCount)),
      decayLr_(params.decayStepSize != 0 && params.decayLrRate != 0.0),
      decayMom_(params.decayStepSize != 0 && params.decayMomRate != 0.0) {
  // Without a first half DeepSpeed divides by zero; a negative second half has no meaning.
  if (params.cycleFirstStepSize < 1 || secondSize_ < 0) {
    throw Error(
        "OneCycle: cycle_first_step_size must be >= 1 and cycle_second_step_size >= 0, got " +
        std::to_string(params.cycleFirstStepSize) + " and " + std::to_string(secondSize_));
  }
  start(lastBatchIteration, optimizerLr, optimizerMomentum);
}

double OneCycle::scaleFactor(int64_t iteration) const {
  const double batch = static_cast<double>(iteration + 1);
  const double cycle = std::floor(1.0 + batch / totalSize_);
  const double x = 1.0 + batch / totalSize_ - cycle;
  double scale;
  int64_t stairs;
  if (x <= stepRatio_) {
    scale = x / stepRatio_;
    stairs = firstStairs_;
  } else {
    scale = (x - 1.0) / (stepRatio_ - 1.0);
    stairs = secondStairs_;
  }
  if (stairs > 0) {
    // Stairs are counted from the integer position in the cycle, not from `scale`, which can land
    // just under a stair at a half-cycle boundary.
    const double inCycle = std::fmod(batch, totalSize_);
    const double position =
        inCycle <= firstSize_ ? inCycle * static_cast<double>(stairs) / firstSize_
                              : (totalSize_ - inCycle) * static_cast<double>(stairs) / secondSize_;
    scale = std::floor(position) / static_cast<double>(stairs);
  }
  return scale;
}

double OneCycle::decayIteration(int64_t iteration) const {
  const double it = static_cast<double>(iteration);
  return it < totalSize_ ? -1.0 : it - totalSize_ + 1.0;
}

double OneCycle::lrAt(int64_t iteration) const {
  const double t = decayIteration(iteration);
  if (t < 0) {
    return params_.cycleMinLr + (params_.cycleMaxLr - params_.cycleMinLr) * scaleFactor(iteration);
  }
  if (!decayLr_) return params_.cycleMinLr;
  const double interval = t / static_cast<double>(params_.decayStepSize);
  return params_.cycleMinLr / (1.0 + params_.decayLrRate * interval);
}

std::optional<double> OneCycle::momentumAt(int64_t iteration) const {
  if (!params_.cycleMomentum) return std::nullopt;
  if (iteration < 0) return params_.cycleMinMom;  // DeepSpeed's constructor sets the minimum
  const double t = decayIteration(iteration);
  if (t < 0) {
    return params_.cycleMaxMom -
           (params_.cycleMaxMom - params_.cycleMinMom) * scaleFactor(iteration);
  }
  if (!decayMom_) return params_.cycleMaxMom;
  const double interval = t / static_cast<double>(params_.decayStepSize);
  return params_.cycleMaxMom * (1.0 + params_.decayMomRate * interval);
}

}  // namespace ds::runtime
