// LossScaler: fp16 loss scaling as DeepSpeed's DynamicLossScaler / LossScaler update it on the
// ZeRO path (deepspeed/runtime/fp16/loss_scaler.py): halve on an overflow once hysteresis is
// used up, double after `window` clean steps, refill hysteresis when the scale grows (or on every
// clean step with consecutive_hysteresis), and stop with an error when an overflow hits a scale
// already at min_loss_scale. Static scaling (loss_scale > 0) and fp32/bf16 (scale 1) never change.
#pragma once

#include <cstdint>

#include "runtime/config/precision_config.h"

namespace ds::runtime {

class LossScaler {
 public:
  // dynamic only for fp16 with loss_scale == 0.
  LossScaler(const LossScaleConfig& config, bool fp16);

  double scale() const { return scale_; }
  bool dynamic() const { return dynamic_; }
  // After each accumulation boundary; throws ds::Error when an overflow hits the minimum scale.
  void update(bool overflow);

  // For checkpoints: everything update() reads.
  struct State {
    double scale;
    int64_t iteration, lastOverflowIteration, hysteresis;
  };
  State state() const { return {scale_, iteration_, lastOverflowIteration_, hysteresis_}; }
  void restore(const State& s);

 private:
  LossScaleConfig config_;
  bool dynamic_;
  double scale_;
  int64_t iteration_ = 0;
  int64_t lastOverflowIteration_ = -1;
  int64_t hysteresis_;
};

}  // namespace ds::runtime
