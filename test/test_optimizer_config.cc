// The "optimizer" block for every type: params and their defaults (DeepSpeed's FusedAdam,
// FusedLamb and torch.optim.SGD), case-insensitive names, accepted-and-ignored keys, and every
// refusal by its message; makeOptimizer builds the class the type names.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "common/error.h"
#include "runtime/config/ds_config.h"
#include "runtime/optim/make_optimizer.h"

using namespace ds::runtime;

namespace {

DeepSpeedConfig parse(const std::string& optimizerBlock) {
  return parseDeepSpeedConfig(R"({"train_batch_size": 4, "optimizer": )" + optimizerBlock + "}", 1,
                              "configs/x.json");
}

OptimizerConfig optimizer(const std::string& optimizerBlock) {
  const DeepSpeedConfig c = parse(optimizerBlock);
  REQUIRE(c.optimizer.has_value());
  CHECK(c.warnings.empty());
  return *c.optimizer;
}

// The fields Adam and Lamb share: lr, betas, eps and weight decay.
template <class Params>
void checkAdamLike(const Params& p, double lr, double beta1, double beta2, double eps,
                   double weightDecay) {
  CHECK(p.lr == lr);
  CHECK(p.beta1 == beta1);
  CHECK(p.beta2 == beta2);
  CHECK(p.eps == eps);
  CHECK(p.weightDecay == weightDecay);
}

}  // namespace

TEST_CASE("optimizer config: Adam and AdamW params and defaults", "[config]") {
  const OptimizerConfig d = optimizer(R"({"type": "Adam"})");
  REQUIRE(d.type == OptimizerType::Adam);
  const AdamParams& a = std::get<AdamParams>(d.params);
  checkAdamLike(a, 1e-3, 0.9, 0.999, 1e-8, 0.0);
  CHECK(a.adamWMode);  // FusedAdam's default
  CHECK(a.biasCorrection);
  CHECK(d.lr() == 1e-3);
  CHECK(d.momentum() == 0.9);

  const OptimizerConfig c = optimizer(R"({"type": "adam", "params": {"lr": 0.01,
      "betas": [0.8, 0.99], "eps": 1e-6, "weight_decay": 0.1, "adam_w_mode": false,
      "bias_correction": false, "torch_adam": true, "amsgrad": false, "set_grad_none": true,
      "foreach": false, "fused": false, "maximize": false}})");
  const AdamParams& p = std::get<AdamParams>(c.params);
  checkAdamLike(p, 0.01, 0.8, 0.99, 1e-6, 0.1);
  CHECK_FALSE(p.adamWMode);
  CHECK_FALSE(p.biasCorrection);
  CHECK(c.momentum() == 0.8);

  for (const char* name : {"AdamW", "adamw", "ADAMW"}) {
    const OptimizerConfig w =
        optimizer(std::string(R"({"type": ")") + name + R"(", "params": {"adam_w_mode": false}})");
    CHECK(w.type == OptimizerType::AdamW);
    CHECK(std::get<AdamParams>(w.params).adamWMode);  // DeepSpeed: name "adamw" forces it
  }
}

TEST_CASE("optimizer config: Lamb params and defaults", "[config]") {
  const OptimizerConfig d = optimizer(R"({"type": "LAMB"})");
  REQUIRE(d.type == OptimizerType::Lamb);
  const LambParams& l = std::get<LambParams>(d.params);
  checkAdamLike(l, 1e-3, 0.9, 0.999, 1e-8, 0.0);
  CHECK(l.biasCorrection);
  CHECK_FALSE(l.epsInsideSqrt);
  CHECK(l.maxCoeff == 10.0);
  CHECK(l.minCoeff == 0.01);

  const OptimizerConfig c = optimizer(R"({"type": "Lamb", "params": {"lr": 0.02,
      "betas": [0.85, 0.98], "eps": 1e-7, "weight_decay": 0.01, "bias_correction": false,
      "eps_inside_sqrt": true, "max_coeff": 5, "min_coeff": 0.1, "amsgrad": false}})");
  const LambParams& p = std::get<LambParams>(c.params);
  checkAdamLike(p, 0.02, 0.85, 0.98, 1e-7, 0.01);
  CHECK_FALSE(p.biasCorrection);
  CHECK(p.epsInsideSqrt);
  CHECK(p.maxCoeff == 5.0);
  CHECK(p.minCoeff == 0.1);
  CHECK(c.lr() == 0.02);
  CHECK(c.momentum() == 0.85);
}

TEST_CASE("optimizer config: SGD params and defaults", "[config]") {
  const OptimizerConfig d = optimizer(R"({"type": "SGD"})");
  REQUIRE(d.type == OptimizerType::SGD);
  const SgdParams& s = std::get<SgdParams>(d.params);
  CHECK(s.lr == 1e-3);
  CHECK(s.momentum == 0.0);
  CHECK(s.dampening == 0.0);
  CHECK(s.weightDecay == 0.0);
  CHECK_FALSE(s.nesterov);

  const OptimizerConfig c = optimizer(R"({"type": "sgd", "params": {"lr": 0.5, "momentum": 0.9,
      "dampening": 0, "weight_decay": 1e-4, "nesterov": true, "maximize": false,
      "foreach": true, "differentiable": false, "fused": false}})");
  const SgdParams& p = std::get<SgdParams>(c.params);
  CHECK(p.lr == 0.5);
  CHECK(p.momentum == 0.9);
  CHECK(p.weightDecay == 1e-4);
  CHECK(p.nesterov);
  CHECK(c.lr() == 0.5);
  CHECK(c.momentum() == 0.9);
  CHECK(std::get<SgdParams>(optimizer(R"({"type": "SGD", "params": {"dampening": 0.25}})").params)
            .dampening == 0.25);
}

TEST_CASE("optimizer config: errors name the path and the fix", "[config]") {
  struct Row {
    const char* block;
    const char* message;
  };
  const std::vector<Row> rows = {
      {R"({"type": "Adagrad"})",
       R"(configs/x.json: optimizer.type: "Adagrad" is not supported (supported: "Adam", "AdamW", "Lamb", "SGD", "OneBitAdam", "ZeroOneAdam", "OneBitLamb"))"},
      {R"({"params": {}})", R"(optimizer.type: missing (supported: "Adam")"},
      {R"({"type": "Adam", "params": {"weight_decy": 0.1}})",
       R"(configs/x.json: unknown key "optimizer.params.weight_decy")"},
      {R"({"type": "Adam", "params": {"weight_decy": 0.1}})",
       R"((did you mean "optimizer.params.weight_decay"?))"},
      {R"({"type": "Lamb", "params": {"max_coef": 1}})",
       R"(unknown key "optimizer.params.max_coef" (did you mean "optimizer.params.max_coeff"?))"},
      {R"({"type": "SGD", "params": {"momentun": 0.9}})",
       R"(unknown key "optimizer.params.momentun" (did you mean "optimizer.params.momentum"?))"},
      // Keys of one type are unknown in another: SGD has no betas, Adam no momentum.
      {R"({"type": "SGD", "params": {"betas": [0.9, 0.99]}})",
       R"(unknown key "optimizer.params.betas")"},
      {R"({"type": "Adam", "params": {"momentum": 0.9}})",
       R"(unknown key "optimizer.params.momentum")"},
      {R"({"type": "Lamb", "params": {"adam_w_mode": true}})",
       R"(unknown key "optimizer.params.adam_w_mode")"},
      {R"({"type": "Lamb", "params": {"max_grad_norm": 1.0}})",
       R"(optimizer.params.max_grad_norm: not supported as an optimizer parameter; use the top-level "gradient_clipping")"},
      {R"({"type": "SGD", "params": {"max_grad_norm": 1.0}})",
       "optimizer.params.max_grad_norm: not supported as an optimizer parameter"},
      {R"({"type": "Lamb", "params": {"betas": [0.9, 1.5]}})",
       "optimizer.params.betas[1]: expected a number in [0, 1), got 1.5"},
      {R"({"type": "Lamb", "params": {"min_coeff": 2, "max_coeff": 1}})",
       "optimizer.params.min_coeff: 2.000000 is above max_coeff 1.000000; the clamp is empty"},
      {R"({"type": "Lamb", "params": {"max_coeff": -1}})",
       "optimizer.params.max_coeff: expected a number >= 0, got -1"},
      {R"({"type": "Lamb", "params": {"amsgrad": true}})",
       "optimizer.params.amsgrad: Lamb has no AMSGrad variant"},
      {R"({"type": "Lamb", "params": {"eps_inside_sqrt": "yes"}})",
       R"(optimizer.params.eps_inside_sqrt: expected true or false, got "yes")"},
      {R"({"type": "Adam", "params": {"amsgrad": true}})",
       "optimizer.params.amsgrad: true is not implemented yet; remove the key"},
      {R"({"type": "Adam", "params": {"maximize": true}})",
       "optimizer.params.maximize: true is not implemented yet"},
      {R"({"type": "Adam", "params": {"torch_adam": 1}})",
       "optimizer.params.torch_adam: expected true or false, got 1"},
      {R"({"type": "SGD", "params": {"nesterov": true}})",
       "optimizer.params.nesterov: Nesterov momentum needs momentum > 0 and dampening 0"},
      {R"({"type": "SGD", "params": {"nesterov": true, "momentum": 0.9, "dampening": 0.1}})",
       "optimizer.params.nesterov: Nesterov momentum needs momentum > 0 and dampening 0"},
      {R"({"type": "SGD", "params": {"momentum": -0.5}})",
       "optimizer.params.momentum: expected a number >= 0, got -0.5"},
      {R"({"type": "SGD", "params": {"lr": "0.1"}})",
       R"(optimizer.params.lr: expected a number, got "0.1")"},
      {R"({"type": "SGD", "params": {"weight_decay": -1e-4}})",
       "optimizer.params.weight_decay: expected a number >= 0, got -0.0001"},
      {R"({"type": "SGD", "params": {"maximize": true}})",
       "optimizer.params.maximize: true is not implemented yet"},
      {R"({"type": "SGD", "params": [1]})", "optimizer.params: expected an object, got [1]"},
  };
  for (const Row& r : rows) {
    INFO(r.block);
    REQUIRE_THROWS_WITH(parse(r.block), Catch::Contains(r.message));
  }
}

TEST_CASE("makeOptimizer: builds the class the type names over the given range", "[optim]") {
  const std::vector<ParamSpec> specs = {{"w", {6}, true, 0, 6}, {"b", {2}, false, 6, 2}};
  struct Row {
    const char* block;
    const char* name;
    size_t stateBytes;  // over the 5-element range [2, 7)
  };
  const std::vector<Row> rows = {
      {R"({"type": "Adam"})", "Adam", 2 * 5 * sizeof(float)},
      {R"({"type": "AdamW"})", "Adam", 2 * 5 * sizeof(float)},
      {R"({"type": "Lamb"})", "Lamb", 2 * 5 * sizeof(float)},
      {R"({"type": "SGD", "params": {"momentum": 0.9}})", "SGD", 5 * sizeof(float)},
      {R"({"type": "SGD"})", "SGD", 0},
  };
  for (const Row& r : rows) {
    INFO(r.block);
    const auto opt = makeOptimizer(optimizer(r.block), specs, 2, 7);
    CHECK(std::string(opt->name()) == r.name);
    CHECK(opt->stateBytes() == r.stateBytes);
    CHECK(opt->steps() == 0);
  }
  OptimizerConfig mismatched;
  mismatched.type = OptimizerType::SGD;  // still holding AdamParams
  REQUIRE_THROWS_WITH(makeOptimizer(mismatched, specs, 0, 8),
                      "makeOptimizer: optimizer type SGD needs SgdParams in "
                      "OptimizerConfig::params; set them or use parseOptimizerConfig");
  REQUIRE_THROWS_WITH(makeOptimizer(OptimizerConfig{}, specs, 5, 3),
                      Catch::Contains("optimizer shard: range begin 5 is past its end 3"));
}
