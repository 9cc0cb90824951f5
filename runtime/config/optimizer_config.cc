// Parses and validates the "optimizer" block; errors name the JSON path. Unknown params keys are
// errors (a misspelled "weight_decay" would silently train without decay); keys that only pick an
// implementation in DeepSpeed or PyTorch (torch_adam, foreach, fused, ...) are accepted and
// ignored.
#include "runtime/config/optimizer_config.h"

#include <algorithm>
#include <cctype>
#include <initializer_list>
#include <string>
#include <type_traits>

#include "common/error.h"
#include "runtime/config/config_blocks.h"

namespace ds::runtime {
namespace {

const std::vector<std::string_view> kOptimizerKeys = {"type", "params", "legacy_fusion"};

// FusedAdam's arguments, DeepSpeed's torch_adam / adam_w_mode, and torch.optim.Adam's.
const std::vector<std::string_view> kAdamKeys = {
    "lr",         "betas",         "eps",      "weight_decay", "adam_w_mode", "bias_correction",
    "amsgrad",    "set_grad_none", "maximize", "torch_adam",   "foreach",     "fused",
    "capturable", "differentiable"};
// FusedLamb's arguments (max_grad_norm is refused before this list is consulted).
const std::vector<std::string_view> kLambKeys = {
    "lr",        "betas",     "eps",    "weight_decay", "bias_correction", "eps_inside_sqrt",
    "max_coeff", "min_coeff", "amsgrad"};
// DeepSpeed's OnebitAdam's, ZeroOneAdam's and OnebitLamb's arguments: the ones they share, then
// each one's own (max_grad_norm is refused before these lists are consulted).
std::vector<std::string_view> oneBitKeys(std::initializer_list<std::string_view> own) {
  std::vector<std::string_view> keys = {"lr",
                                        "betas",
                                        "eps",
                                        "weight_decay",
                                        "bias_correction",
                                        "amsgrad",
                                        "cuda_aware",
                                        "comm_backend_name",
                                        "eps_inside_sqrt"};
  keys.insert(keys.end(), own);
  return keys;
}
const std::vector<std::string_view> kOneBitAdamKeys = oneBitKeys({"freeze_step"});
const std::vector<std::string_view> kZeroOneAdamKeys =
    oneBitKeys({"var_freeze_step", "var_update_scaler", "local_step_scaler", "local_step_clipper"});
const std::vector<std::string_view> kOneBitLambKeys =
    oneBitKeys({"freeze_step", "max_coeff", "min_coeff", "coeff_beta", "factor_max", "factor_min",
                "factor_threshold"});
// torch.optim.SGD's arguments.
const std::vector<std::string_view> kSgdKeys = {"lr",           "momentum",       "dampening",
                                                "weight_decay", "nesterov",       "maximize",
                                                "foreach",      "differentiable", "fused"};

const char* kSupported =
    R"((supported: "Adam", "AdamW", "Lamb", "SGD", "OneBitAdam", "ZeroOneAdam", "OneBitLamb"))";
const char* kPrefix = "optimizer.params";

std::string lowercase(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

void readBetas(const JsonReader& r, const Json& params, double& beta1, double& beta2) {
  const Json* v = JsonReader::member(params, "betas");
  if (!v) return;
  if (!v->is_array() || v->size() != 2) {
    r.fail("optimizer.params.betas", "expected an array of 2 numbers, got " + describeJson(*v));
  }
  double* out[2] = {&beta1, &beta2};
  for (int i = 0; i < 2; ++i) {
    const std::string path = "optimizer.params.betas[" + std::to_string(i) + "]";
    *out[i] = r.number((*v)[i], path);
    if (!(*out[i] >= 0.0 && *out[i] < 1.0)) {
      r.fail(path, "expected a number in [0, 1), got " + describeJson((*v)[i]));
    }
  }
}

// A boolean switch whose `true` we do not implement: false (or absent) is fine.
void refuseTrue(const JsonReader& r, const Json& params, std::string_view key,
                const std::string& why) {
  bool value = false;
  r.readBool(params, kPrefix, key, value);
  if (value) r.fail(joinPath(kPrefix, key), why);
}

// min <= max of the pair at `minKey` and `maxKey`, or an error naming minKey.
void checkOrdered(const JsonReader& r, double min, double max, const std::string& minKey,
                  const std::string& maxKey) {
  if (min > max)
    r.fail(joinPath(kPrefix, minKey), std::to_string(min) + " is above " + maxKey + " " +
                                          std::to_string(max) + "; the clamp is empty");
}

// Implementation switches: checked for type, then ignored (the maths does not change).
void acceptBooleans(const JsonReader& r, const Json& params,
                    const std::vector<std::string_view>& keys) {
  for (std::string_view key : keys) {
    bool ignored = false;
    r.readBool(params, kPrefix, key, ignored);
  }
}

// The keys Adam and Lamb share, in the order both read them: lr, betas, eps, weight_decay.
template <class Params>
Params readAdamFamily(const JsonReader& r, const Json& params,
                      const std::vector<std::string_view>& knownKeys) {
  r.rejectUnknownKeys(params, kPrefix, knownKeys);
  Params p;
  r.readNonNegative(params, kPrefix, "lr", p.lr);
  readBetas(r, params, p.beta1, p.beta2);
  r.readNonNegative(params, kPrefix, "eps", p.eps);
  r.readNonNegative(params, kPrefix, "weight_decay", p.weightDecay);
  return p;
}

AdamParams parseAdam(const JsonReader& r, const Json& params) {
  AdamParams p = readAdamFamily<AdamParams>(r, params, kAdamKeys);
  r.readBool(params, kPrefix, "adam_w_mode", p.adamWMode);
  r.readBool(params, kPrefix, "bias_correction", p.biasCorrection);
  refuseTrue(r, params, "amsgrad", "true is not implemented yet; remove the key");
  refuseTrue(r, params, "maximize", "true is not implemented yet; negate the loss instead");
  acceptBooleans(
      r, params,
      {"torch_adam", "set_grad_none", "foreach", "fused", "capturable", "differentiable"});
  return p;
}

LambParams parseLamb(const JsonReader& r, const Json& params) {
  LambParams p = readAdamFamily<LambParams>(r, params, kLambKeys);
  r.readBool(params, kPrefix, "bias_correction", p.biasCorrection);
  r.readBool(params, kPrefix, "eps_inside_sqrt", p.epsInsideSqrt);
  r.readNonNegative(params, kPrefix, "max_coeff", p.maxCoeff);
  r.readNonNegative(params, kPrefix, "min_coeff", p.minCoeff);
  checkOrdered(r, p.minCoeff, p.maxCoeff, "min_coeff", "max_coeff");
  refuseTrue(r, params, "amsgrad",
             "Lamb has no AMSGrad variant (DeepSpeed's FusedLamb refuses it too); remove the key");
  return p;
}

// The switches every 1-bit optimizer of DeepSpeed takes: bias_correction (which changes nothing
// there either), cuda_aware and comm_backend_name (DeepSpeed's transports; the job's own
// communicator carries the compressed exchange whichever is named), and the two it refuses or
// ignores.
void readOneBitSwitches(const JsonReader& r, const Json& params, const std::string& what) {
  acceptBooleans(r, params, {"bias_correction", "cuda_aware"});
  refuseTrue(r, params, "amsgrad", what + " has no AMSGrad variant (DeepSpeed's refuses it too)");
  refuseTrue(r, params, "eps_inside_sqrt",
             what + " adds eps outside the square root (DeepSpeed's ignores this key); remove it");
  if (const Json* name = JsonReader::member(params, "comm_backend_name")) {
    const std::string backend = r.string(*name, "optimizer.params.comm_backend_name");
    if (backend != "nccl" && backend != "mpi" && backend != "hccl" && backend != "compressed")
      r.fail("optimizer.params.comm_backend_name",
             "\"" + backend +
                 "\": expected one of nccl, mpi, hccl, compressed (DeepSpeed's; the "
                 "job's own communicator carries the compressed exchange whichever is named)");
  }
}

OneBitAdamParams parseOneBitAdam(const JsonReader& r, const Json& params) {
  OneBitAdamParams p = readAdamFamily<OneBitAdamParams>(r, params, kOneBitAdamKeys);
  r.readInt(params, kPrefix, "freeze_step", p.freezeStep, 0);
  readOneBitSwitches(r, params, "1-bit Adam");
  return p;
}

ZeroOneAdamParams parseZeroOneAdam(const JsonReader& r, const Json& params) {
  ZeroOneAdamParams p = readAdamFamily<ZeroOneAdamParams>(r, params, kZeroOneAdamKeys);
  r.readInt(params, kPrefix, "var_freeze_step", p.varFreezeStep, 0);
  r.readInt(params, kPrefix, "var_update_scaler", p.varUpdateScaler, 1);
  r.readInt(params, kPrefix, "local_step_scaler", p.localStepScaler, 1);
  r.readInt(params, kPrefix, "local_step_clipper", p.localStepClipper, 1);
  readOneBitSwitches(r, params, "0/1 Adam");
  return p;
}

OneBitLambParams parseOneBitLamb(const JsonReader& r, const Json& params) {
  OneBitLambParams p = readAdamFamily<OneBitLambParams>(r, params, kOneBitLambKeys);
  r.readInt(params, kPrefix, "freeze_step", p.freezeStep, 0);
  r.readNonNegative(params, kPrefix, "max_coeff", p.maxCoeff);
  r.readNonNegative(params, kPrefix, "min_coeff", p.minCoeff);
  checkOrdered(r, p.minCoeff, p.maxCoeff, "min_coeff", "max_coeff");
  r.readNonNegative(params, kPrefix, "coeff_beta", p.coeffBeta);
  if (p.coeffBeta >= 1.0)
    r.fail("optimizer.params.coeff_beta",
           "expected a number in [0, 1), got " + std::to_string(p.coeffBeta));
  r.readNonNegative(params, kPrefix, "factor_max", p.factorMax);
  r.readNonNegative(params, kPrefix, "factor_min", p.factorMin);
  checkOrdered(r, p.factorMin, p.factorMax, "factor_min", "factor_max");
  r.readNonNegative(params, kPrefix, "factor_threshold", p.factorThreshold);
  readOneBitSwitches(r, params, "1-bit LAMB");
  return p;
}

SgdParams parseSgd(const JsonReader& r, const Json& params) {
  r.rejectUnknownKeys(params, kPrefix, kSgdKeys);
  SgdParams p;
  r.readNonNegative(params, kPrefix, "lr", p.lr);
  r.readNonNegative(params, kPrefix, "momentum", p.momentum);
  r.readNumber(params, kPrefix, "dampening", p.dampening);
  r.readNonNegative(params, kPrefix, "weight_decay", p.weightDecay);
  r.readBool(params, kPrefix, "nesterov", p.nesterov);
  if (p.nesterov && (p.momentum <= 0.0 || p.dampening != 0.0)) {
    r.fail("optimizer.params.nesterov",
           "Nesterov momentum needs momentum > 0 and dampening 0 (torch.optim.SGD refuses it "
           "too); set momentum or remove nesterov");
  }
  refuseTrue(r, params, "maximize", "true is not implemented yet; negate the loss instead");
  acceptBooleans(r, params, {"foreach", "differentiable", "fused"});
  return p;
}

}  // namespace

double OptimizerConfig::lr() const {
  return std::visit([](const auto& p) { return p.lr; }, params);
}

double OptimizerConfig::momentum() const {
  return std::visit(
      [](const auto& p) {
        if constexpr (std::is_same_v<std::decay_t<decltype(p)>, SgdParams>)
          return p.momentum;
        else
          return p.beta1;
      },
      params);
}

const char* optimizerTypeName(OptimizerType type) {
  switch (type) {
    case OptimizerType::Adam:
      return "Adam";
    case OptimizerType::AdamW:
      return "AdamW";
    case OptimizerType::Lamb:
      return "Lamb";
    case OptimizerType::SGD:
      return "SGD";
    case OptimizerType::OneBitAdam:
      return "OneBitAdam";
    case OptimizerType::ZeroOneAdam:
      return "ZeroOneAdam";
    case OptimizerType::OneBitLamb:
      return "OneBitLamb";
  }
  return "?";
}

OptimizerConfig parseOptimizerConfig(JsonReader& r, const Json& block) {
  r.object(block, "optimizer");
  r.warnUnknownKeys(block, "optimizer", kOptimizerKeys);
  const Json* typeJson = JsonReader::member(block, "type");
  if (!typeJson) r.fail("optimizer.type", std::string("missing ") + kSupported);
  const std::string name = r.string(*typeJson, "optimizer.type");
  OptimizerConfig out;
  bool known = false;
  for (OptimizerType t :
       {OptimizerType::Adam, OptimizerType::AdamW, OptimizerType::Lamb, OptimizerType::SGD,
        OptimizerType::OneBitAdam, OptimizerType::ZeroOneAdam, OptimizerType::OneBitLamb}) {
    if (lowercase(name) == lowercase(optimizerTypeName(t))) {
      out.type = t;
      known = true;
    }
  }
  if (!known) r.fail("optimizer.type", "\"" + name + "\" is not supported " + kSupported);

  const Json empty = Json::object();
  const Json* params = JsonReader::member(block, "params");
  if (params) {
    r.object(*params, kPrefix);
    // DeepSpeed checks this before building any optimizer.
    if (JsonReader::member(*params, "max_grad_norm")) {
      r.fail("optimizer.params.max_grad_norm",
             "not supported as an optimizer parameter; use the top-level \"gradient_clipping\"");
    }
  } else {
    params = &empty;
  }
  switch (out.type) {
    case OptimizerType::Adam:
    case OptimizerType::AdamW: {
      AdamParams p = parseAdam(r, *params);
      // DeepSpeed: adam_w_mode = (name == "adamw") or params.adam_w_mode.
      if (out.type == OptimizerType::AdamW) p.adamWMode = true;
      out.params = p;
      break;
    }
    case OptimizerType::Lamb:
      out.params = parseLamb(r, *params);
      break;
    case OptimizerType::SGD:
      out.params = parseSgd(r, *params);
      break;
    case OptimizerType::OneBitAdam:
      out.params = parseOneBitAdam(r, *params);
      break;
    case OptimizerType::ZeroOneAdam:
      out.params = parseZeroOneAdam(r, *params);
      break;
    case OptimizerType::OneBitLamb:
      out.params = parseOneBitLamb(r, *params);
      break;
  }
  return out;
}

bool isOneBit(OptimizerType type) {
  return type == OptimizerType::OneBitAdam || type == OptimizerType::ZeroOneAdam ||
         type == OptimizerType::OneBitLamb;
}

double optimizerStateBytesPerParameter(const OptimizerConfig& config) {
  if (config.type == OptimizerType::OneBitLamb) return 12;
  if (config.type != OptimizerType::SGD) return 8;
  const SgdParams* sgd = std::get_if<SgdParams>(&config.params);
  return sgd && sgd->momentum > 0 ? 4 : 0;
}

double oneBitFeedbackBytesPerParameter(const OptimizerConfig& config, int world) {
  if (!isOneBit(config.type)) return 0.0;
  const double beside = config.type == OptimizerType::OneBitAdam ? 0.0 : 1.0;
  return sizeof(float) * (1.0 + 1.0 / std::max(1, world) + beside);
}

void checkOptimizerModelParallel(const OptimizerConfig& config, int modelParallelSize) {
  // LAMB's trust ratio is a per-tensor norm: a sliced tensor's would need the model group's sum
  // (and a replicated one must not get it), which its update does not do yet.
  if (modelParallelSize > 1 && config.type == OptimizerType::Lamb)
    throw Error(
        "optimizer: Lamb is not supported with model-parallel-size > 1 yet (its per-tensor "
        "trust ratio would see only this rank's slice); use Adam or AdamW");
}

void checkOneBitLayout(const OptimizerConfig& config, int zeroStage, int pipe, int model,
                       bool experts) {
  if (!isOneBit(config.type)) return;
  const std::string name = optimizerTypeName(config.type);
  if (zeroStage != 0)
    throw Error("optimizer: " + name + " with zero_optimization.stage " +
                std::to_string(zeroStage) +
                ": a 1-bit optimizer exchanges whole momentums, so it runs without ZeRO (stage "
                "0), as in DeepSpeed");
  if (pipe > 1 || model > 1 || experts)
    throw Error("optimizer: " + name + " with " +
                (pipe > 1    ? "pipe-parallel-size " + std::to_string(pipe)
                 : model > 1 ? "model-parallel-size " + std::to_string(model)
                             : std::string("MoE experts")) +
                " is not implemented yet; use data parallelism only");
}

}  // namespace ds::runtime
