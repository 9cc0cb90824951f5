// LossScaler: DeepSpeed's update rule, step by step (see the header).
#include "runtime/precision/loss_scaler.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "common/error.h"

namespace ds::runtime {

LossScaler::LossScaler(const LossScaleConfig& config, bool fp16)
    : config_(config),
      dynamic_(fp16 && config.staticScale == 0.0),
      scale_(!fp16      ? 1.0
             : dynamic_ ? std::ldexp(1.0, static_cast<int>(config.initialScalePower))
                        : config.staticScale),
      hysteresis_(config.hysteresis) {}

void LossScaler::update(bool overflow) {
  if (!dynamic_) return;
  if (overflow) {
    if (config_.hysteresis == 1 || hysteresis_ == 1) {
      if (scale_ == config_.minScale)
        throw Error("fp16: gradients overflowed at the minimum loss scale " +
                    std::to_string(config_.minScale) +
                    " (fp16.min_loss_scale); the run cannot continue: lower the learning rate, "
                    "use bf16, or lower fp16.min_loss_scale");
      scale_ = std::max(scale_ / 2.0, config_.minScale);
    } else {
      --hysteresis_;
    }
    lastOverflowIteration_ = iteration_;
  } else {
    if (config_.consecutiveHysteresis) hysteresis_ = config_.hysteresis;
    const int64_t stable = iteration_ - lastOverflowIteration_ - 1;
    if (stable > 0 && stable % config_.window == 0) {
      if (!config_.consecutiveHysteresis) hysteresis_ = config_.hysteresis;
      scale_ *= 2.0;
    }
  }
  ++iteration_;
}

void LossScaler::restore(const State& s) {
  scale_ = s.scale;
  iteration_ = s.iteration;
  lastOverflowIteration_ = s.lastOverflowIteration;
  hysteresis_ = s.hysteresis;
}

}  // namespace ds::runtime
