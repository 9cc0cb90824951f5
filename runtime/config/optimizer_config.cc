// Parses and validates the "optimizer" block; errors name the JSON path.
#include "runtime/config/optimizer_config.h"

#include <cctype>

#include "runtime/config/config_blocks.h"

namespace ds::runtime {
namespace {

const std::vector<std::string_view> kAdamKeys = {
    "lr",         "betas",           "eps",     "weight_decay", "adam_w_mode",
    "torch_adam", "bias_correction", "amsgrad", "max_grad_norm"};

const std::vector<std::string_view> kOptimizerKeys = {"type", "params", "legacy_fusion"};

}  // namespace

OptimizerConfig parseOptimizerConfig(JsonReader& r, const Json& block) {
  r.object(block, "optimizer");
  r.warnUnknownKeys(block, "optimizer", kOptimizerKeys);
  OptimizerConfig out;
  const Json* type = JsonReader::member(block, "type");
  if (!type) r.fail("optimizer.type", "missing (supported: \"Adam\", \"AdamW\")");
  std::string name = r.string(*type, "optimizer.type");
  std::string lowered = name;
  for (char& c : lowered) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  // DeepSpeed matches optimizer names case-insensitively.
  if (lowered == "adam") {
    out.type = OptimizerType::Adam;
  } else if (lowered == "adamw") {
    out.type = OptimizerType::AdamW;
  } else {
    r.fail("optimizer.type", "\"" + name + "\" is not supported (supported: \"Adam\", \"AdamW\")");
  }

  AdamParams& p = out.params;
  if (const Json* params = JsonReader::member(block, "params")) {
    r.object(*params, "optimizer.params");
    r.warnUnknownKeys(*params, "optimizer.params", kAdamKeys);
    if (JsonReader::member(*params, "max_grad_norm")) {
      r.fail("optimizer.params.max_grad_norm",
             "not supported as an optimizer parameter; use the top-level \"gradient_clipping\"");
    }
    r.readNonNegative(*params, "optimizer.params", "lr", p.lr);
    if (const Json* v = JsonReader::member(*params, "betas")) {
      if (!v->is_array() || v->size() != 2) {
        r.fail("optimizer.params.betas", "expected an array of 2 numbers, got " + describeJson(*v));
      }
      p.beta1 = r.number((*v)[0], "optimizer.params.betas[0]");
      p.beta2 = r.number((*v)[1], "optimizer.params.betas[1]");
      for (int i = 0; i < 2; ++i) {
        const double b = i == 0 ? p.beta1 : p.beta2;
        if (!(b >= 0.0 && b < 1.0)) {
          r.fail("optimizer.params.betas[" + std::to_string(i) + "]",
                 "expected a number in [0, 1), got " + describeJson((*v)[i]));
        }
      }
    }
    r.readNonNegative(*params, "optimizer.params", "eps", p.eps);
    r.readNonNegative(*params, "optimizer.params", "weight_decay", p.weightDecay);
    r.readBool(*params, "optimizer.params", "adam_w_mode", p.adamWMode);
    // torch_adam only picks DeepSpeed's implementation; the maths is the same, so it is ignored.
    bool torchAdam = false, biasCorrection = true, amsgrad = false;
    r.readBool(*params, "optimizer.params", "torch_adam", torchAdam);
    r.readBool(*params, "optimizer.params", "bias_correction", biasCorrection);
    r.readBool(*params, "optimizer.params", "amsgrad", amsgrad);
    if (!biasCorrection) {
      r.fail("optimizer.params.bias_correction", "false is not implemented yet; remove the key");
    }
    if (amsgrad) r.fail("optimizer.params.amsgrad", "true is not implemented yet; remove the key");
  }
  // DeepSpeed: adam_w_mode = (name == "adamw") or params.adam_w_mode.
  if (out.type == OptimizerType::AdamW) p.adamWMode = true;
  return out;
}

}  // namespace ds::runtime
