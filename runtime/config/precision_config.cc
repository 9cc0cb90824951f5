// Parses "fp16", "bf16" (alias "bfloat16"), "data_types" and the gradient-averaging keys, and
// refuses the combinations DeepSpeed refuses (fp16 with bf16, amp with ZeRO).
#include "runtime/config/precision_config.h"

#include <cmath>

#include "common/error.h"
#include "runtime/config/config_blocks.h"

namespace ds::runtime {
namespace {

const std::vector<std::string_view> kFp16Keys = {"enabled",
                                                 "auto_cast",
                                                 "loss_scale",
                                                 "initial_scale_power",
                                                 "loss_scale_window",
                                                 "hysteresis",
                                                 "consecutive_hysteresis",
                                                 "min_loss_scale",
                                                 "fp16_master_weights_and_grads"};
const std::vector<std::string_view> kBf16Keys = {
    "enabled", "immediate_grad_update", "check_grad_overflow", "bf16_master_weights_and_grads",
    "bf16_optimizer_states"};

bool blockEnabled(JsonReader& r, const Json& root, std::string_view name,
                  const std::vector<std::string_view>& keys) {
  const Json* block = JsonReader::member(root, name);
  if (!block) return false;
  r.object(*block, std::string(name));
  r.warnUnknownKeys(*block, std::string(name), keys);
  bool enabled = false;
  r.readBool(*block, std::string(name), "enabled", enabled);
  return enabled;
}

DType readDType(JsonReader& r, const Json& v, const std::string& path) {
  const std::string text = r.string(v, path);
  try {
    return parseDType(text, path);
  } catch (const Error&) {
    r.fail(path, "expected \"fp32\", \"bf16\" or \"fp16\", got " + describeJson(v));
  }
}

}  // namespace

PrecisionConfig parsePrecisionConfig(JsonReader& r, const Json& root, int zeroStage) {
  PrecisionConfig c;
  const bool fp16 = blockEnabled(r, root, "fp16", kFp16Keys);
  const bool bf16 = blockEnabled(r, root, "bf16", kBf16Keys);
  const bool bfloat16 = blockEnabled(r, root, "bfloat16", kBf16Keys);
  if (JsonReader::member(root, "bf16") && JsonReader::member(root, "bfloat16"))
    r.fail("bfloat16", "\"bf16\" and its old name \"bfloat16\" are both given; keep \"bf16\"");
  if (fp16 && (bf16 || bfloat16))
    r.fail("fp16.enabled", "fp16 and bf16 cannot both be enabled; choose one");
  const Json* amp = JsonReader::member(root, "amp");
  bool ampOn = false;
  if (amp) {
    r.object(*amp, "amp");
    r.readBool(*amp, "amp", "enabled", ampOn);
  }
  if (ampOn && zeroStage > 0)
    r.fail("amp.enabled", "amp cannot be combined with ZeRO (stage " + std::to_string(zeroStage) +
                              "); use \"fp16\" or \"bf16\" instead, as DeepSpeed requires");
  if (ampOn) r.fail("amp.enabled", "Apex amp is not available natively; use \"fp16\" or \"bf16\"");

  if (fp16) {
    c.modelDtype = DType::F16;
    const Json& b = *JsonReader::member(root, "fp16");
    LossScaleConfig& s = c.lossScale;
    r.readNonNegative(b, "fp16", "loss_scale", s.staticScale);
    r.readInt(b, "fp16", "initial_scale_power", s.initialScalePower, 0);
    if (s.initialScalePower > 64)
      r.fail("fp16.initial_scale_power", "expected at most 64 (2^64 overflows fp32 scaling), got " +
                                             std::to_string(s.initialScalePower));
    r.readInt(b, "fp16", "loss_scale_window", s.window, 1);
    r.readInt(b, "fp16", "hysteresis", s.hysteresis, 1);
    r.readBool(b, "fp16", "consecutive_hysteresis", s.consecutiveHysteresis);
    r.readNonNegative(b, "fp16", "min_loss_scale", s.minScale);
    if (!(s.minScale > 0.0)) r.fail("fp16.min_loss_scale", "expected a number > 0, got 0");
  } else if (bf16 || bfloat16) {
    c.modelDtype = DType::BF16;
  }

  if (const Json* dt = JsonReader::member(root, "data_types")) {
    r.object(*dt, "data_types");
    r.warnUnknownKeys(*dt, "data_types", {"grad_accum_dtype"});
    if (const Json* v = JsonReader::member(*dt, "grad_accum_dtype"))
      c.gradAccumDtype = readDType(r, *v, "data_types.grad_accum_dtype");
  }
  if (const Json* v = JsonReader::member(root, "communication_data_type"))
    c.communicationDtype = readDType(r, *v, "communication_data_type");
  // The older reference's fp32_allreduce: true is communication_data_type "fp32".
  bool fp32AllReduce = false;
  r.readBool(root, "", "fp32_allreduce", fp32AllReduce);
  if (fp32AllReduce) {
    if (c.communicationDtype && *c.communicationDtype != DType::F32)
      r.fail("fp32_allreduce", "true contradicts communication_data_type \"" +
                                   std::string(dtypeName(*c.communicationDtype)) +
                                   "\"; keep one of them");
    c.communicationDtype = DType::F32;
  }
  r.readBool(root, "", "prescale_gradients", c.prescaleGradients);
  r.readNonNegative(root, "", "gradient_predivide_factor", c.gradientPredivideFactor);
  if (!(c.gradientPredivideFactor > 0.0))
    r.fail("gradient_predivide_factor", "expected a number > 0, got 0");
  return c;
}

}  // namespace ds::runtime
