// The "fp16", "bf16" and "data_types" blocks plus communication_data_type: which precision the
// model runs in, how fp16 loss scaling behaves (DeepSpeed's defaults), and the accumulation and
// communication dtypes.
#pragma once

#include <cstdint>
#include <optional>

#include "common/dtype.h"

namespace ds::runtime {

struct LossScaleConfig {
  double staticScale = 0.0;  // fp16.loss_scale: > 0 = static, 0 = dynamic
  int64_t initialScalePower = 16;
  int64_t window = 1000;  // loss_scale_window
  int64_t hysteresis = 2;
  bool consecutiveHysteresis = false;
  double minScale = 1.0;  // min_loss_scale
};

struct PrecisionConfig {
  DType modelDtype = DType::F32;            // fp16.enabled -> F16, bf16.enabled -> BF16
  LossScaleConfig lossScale;                // fp16 only
  std::optional<DType> gradAccumDtype;      // data_types.grad_accum_dtype; default: modelDtype
  std::optional<DType> communicationDtype;  // communication_data_type; default: grad dtype
  bool prescaleGradients = false;
  double gradientPredivideFactor = 1.0;
};

}  // namespace ds::runtime
