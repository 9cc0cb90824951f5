// The "optimizer" block of ds_config.json: type and params, typed and validated.
// Parsed by parseOptimizerConfig (called from parseDeepSpeedConfig); JSON stays out of this header.
#pragma once

namespace ds::runtime {

enum class OptimizerType { Adam, AdamW };

// Defaults are DeepSpeed's FusedAdam ones; adam_w_mode defaults to true there too.
struct AdamParams {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weightDecay = 0.0;
  bool adamWMode = true;  // decoupled weight decay; false = L2 added to the gradient
};

struct OptimizerConfig {
  OptimizerType type = OptimizerType::Adam;
  AdamParams params;
};

}  // namespace ds::runtime
