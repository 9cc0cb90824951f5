// Batch-size inference (DEEPSPEED-SEMANTICS.md 15.3/15.4, Python floor semantics) and the typed
// ds_config.json parser: defaults, optimizer/scheduler blocks, warnings, and error messages.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"
#include "runtime/config/batch_size.h"
#include "runtime/config/closest_key.h"
#include "runtime/config/ds_config.h"
#include "test/scratch_dir.h"

using namespace ds::runtime;
using Opt = std::optional<int64_t>;

TEST_CASE("inferBatchSizes: every row of the 15.3 table", "[batch]") {
  struct Row {
    const char* name;
    Opt train, micro, gas;
    int64_t world;
    int64_t wantTrain, wantMicro, wantGas;
  };
  const std::vector<Row> rows = {
      {"train, micro, gas: nothing inferred", 32, 4, 2, 4, 32, 4, 2},
      {"train, micro: gas = (train // micro) // W", 32, 4, {}, 2, 32, 4, 4},
      {"train, gas: micro = (train // W) // gas", 32, {}, 2, 4, 32, 4, 2},
      {"micro, gas: train = micro * gas * W", {}, 4, 2, 3, 24, 4, 2},
      {"train only: gas 1, micro = train // W", 32, {}, {}, 4, 32, 8, 1},
      {"micro only: train = micro * W, gas 1", {}, 4, {}, 3, 12, 4, 1},
      {"world size 1", 6, {}, 3, 1, 6, 2, 3},
      {"world size 7", {}, 1, 1, 7, 7, 1, 1},
  };
  for (const auto& r : rows) {
    SECTION(r.name) {
      const BatchConfig b = inferBatchSizes(r.train, r.micro, r.gas, r.world);
      CHECK(b.trainBatchSize == r.wantTrain);
      CHECK(b.microBatchPerGpu == r.wantMicro);
      CHECK(b.gradientAccumulationSteps == r.wantGas);
    }
  }
}

TEST_CASE("inferBatchSizes: errors in DeepSpeed's order with computed values", "[batch]") {
  struct Row {
    Opt train, micro, gas;
    int64_t world;
    const char* message;
  };
  const std::vector<Row> rows = {
      {{},
       {},
       4,
       2,
       "Either train_batch_size or train_micro_batch_size_per_gpu needs to be provided"},
      {{},
       {},
       {},
       2,
       "Either train_batch_size or train_micro_batch_size_per_gpu needs to be provided"},
      {32, 4, 2, 3,
       "train_batch_size is not equal to micro_batch_per_gpu * gradient_acc_step * world_size: "
       "32 != 4 * 2 * 3 (world size 3)"},
      // Inferred micro 30 // 4 = 7 does not add up: the message shows the inferred numbers.
      {30, {}, {}, 4, "30 != 7 * 1 * 4 (world size 4)"},
      {33, 17, {}, 2, "Gradient accumulation steps: 0 has to be greater than 0"},
      {2, {}, {}, 4, "Micro batch size per gpu: 0 has to be greater than 0"},
      {-8, 4, 2, 1, "Train batch size: -8 has to be greater than 0"},
      {8, -2, 2, 1, "Micro batch size per gpu: -2 has to be greater than 0"},
      {8, 2, -2, 1, "Gradient accumulation steps: -2 has to be greater than 0"},
      // Order: train is checked before micro and gas, even when all are bad.
      {0, 0, 0, 1, "Train batch size: 0 has to be greater than 0"},
      {8, 0, 0, 1, "Micro batch size per gpu: 0 has to be greater than 0"},
      // Floor division: 7 // -2 == -4 in Python (C++ truncation would give -3).
      {7, {}, -2, 1, "Micro batch size per gpu: -4 has to be greater than 0"},
      // -7 // 2 == -4, then train fails first.
      {-7, 2, {}, 1, "Train batch size: -7 has to be greater than 0"},
      {{}, 0, {}, 4, "Train batch size: 0 has to be greater than 0"},
      {{}, 0, 2, 4, "Train batch size: 0 has to be greater than 0"},
      // DeepSpeed's ZeroDivisionError cases name the zero key.
      {8, 0, {}, 1, "train_micro_batch_size_per_gpu is 0: it has to be greater than 0"},
      {8, {}, 0, 1, "gradient_accumulation_steps is 0: it has to be greater than 0"},
      {8, {}, {}, 0, "world size has to be greater than 0, got 0"},
      {{}, INT64_MAX, 2, 2, "overflows"},
  };
  for (const auto& r : rows) {
    INFO("train=" << (r.train ? std::to_string(*r.train) : "None")
                  << " micro=" << (r.micro ? std::to_string(*r.micro) : "None")
                  << " gas=" << (r.gas ? std::to_string(*r.gas) : "None") << " W=" << r.world);
    REQUIRE_THROWS_AS(inferBatchSizes(r.train, r.micro, r.gas, r.world), ds::Error);
    REQUIRE_THROWS_WITH(inferBatchSizes(r.train, r.micro, r.gas, r.world),
                        Catch::Contains(r.message));
  }
}

TEST_CASE("closestKey", "[config]") {
  const std::vector<std::string_view> keys = {"train_batch_size", "train_micro_batch_size_per_gpu",
                                              "steps_per_print"};
  CHECK(closestKey("train_batch_sizes", keys) == "train_batch_size");
  CHECK(closestKey("TRAIN_BATCH_SIZE", keys) == "train_batch_size");
  CHECK(closestKey("step_per_print", keys) == "steps_per_print");
  CHECK(closestKey("completely_unrelated", keys).empty());
  CHECK(closestKey("x", {}).empty());
}

namespace {

DeepSpeedConfig parse(const std::string& json, int64_t world = 1) {
  return parseDeepSpeedConfig(json, world, "configs/x.json");
}

bool hasWarning(const DeepSpeedConfig& c, const std::string& text) {
  for (const auto& w : c.warnings) {
    if (w.find(text) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("ds_config: defaults", "[config]") {
  const DeepSpeedConfig c = parse(R"({"train_batch_size": 8})", 2);
  CHECK(c.batch.trainBatchSize == 8);
  CHECK(c.batch.microBatchPerGpu == 4);
  CHECK(c.batch.gradientAccumulationSteps == 1);
  CHECK_FALSE(c.optimizer.has_value());
  CHECK_FALSE(c.scheduler.has_value());
  CHECK(c.gradientClipping == 0.0);
  CHECK(c.stepsPerPrint == 10);
  CHECK(c.zero.stage == 0);
  CHECK(c.warnings.empty());
}

TEST_CASE("ds_config: null is the same as absent", "[config]") {
  const DeepSpeedConfig c = parse(R"({"train_batch_size": 8, "train_micro_batch_size_per_gpu": null,
      "gradient_accumulation_steps": null, "optimizer": null, "scheduler": null,
      "gradient_clipping": null, "steps_per_print": null, "zero_optimization": null})");
  CHECK(c.batch.microBatchPerGpu == 8);
  CHECK_FALSE(c.optimizer.has_value());
  CHECK_FALSE(c.scheduler.has_value());
  CHECK(c.stepsPerPrint == 10);
  const DeepSpeedConfig p = parse(R"({"train_batch_size": 8,
      "optimizer": {"type": "Adam", "params": {"lr": null, "betas": null}}})");
  CHECK(p.optimizer->lr() == 1e-3);
  CHECK(std::get<AdamParams>(p.optimizer->params).beta1 == 0.9);
}

TEST_CASE("ds_config: optimizer", "[config]") {
  SECTION("Adam params") {
    const DeepSpeedConfig c = parse(R"({"train_batch_size": 4, "optimizer": {"type": "Adam",
        "params": {"lr": 0.01, "betas": [0.8, 0.99], "eps": 1e-6, "weight_decay": 3e-7,
                   "adam_w_mode": false, "torch_adam": true}}})");
    REQUIRE(c.optimizer.has_value());
    const AdamParams& p = std::get<AdamParams>(c.optimizer->params);
    CHECK(c.optimizer->type == OptimizerType::Adam);
    CHECK(p.lr == 0.01);
    CHECK(p.beta1 == 0.8);
    CHECK(p.beta2 == 0.99);
    CHECK(p.eps == 1e-6);
    CHECK(p.weightDecay == 3e-7);
    CHECK_FALSE(p.adamWMode);
    CHECK(c.warnings.empty());
  }
  SECTION("missing params block gives defaults; integer lr is a number") {
    const DeepSpeedConfig c = parse(R"({"train_batch_size": 4, "optimizer": {"type": "adam"}})");
    CHECK(c.optimizer->lr() == 1e-3);
    CHECK(std::get<AdamParams>(c.optimizer->params).adamWMode);
    CHECK(parse(R"({"train_batch_size": 4, "optimizer": {"type": "Adam", "params": {"lr": 1}}})")
              .optimizer->lr() == 1.0);
  }
  SECTION("AdamW forces adam_w_mode, names are case-insensitive") {
    for (const char* name : {"AdamW", "adamw", "ADAMW"}) {
      const DeepSpeedConfig c =
          parse(std::string(R"({"train_batch_size": 4, "optimizer": {"type": ")") + name +
                R"(", "params": {"adam_w_mode": false}}})");
      CHECK(c.optimizer->type == OptimizerType::AdamW);
      CHECK(std::get<AdamParams>(c.optimizer->params).adamWMode);
    }
  }
  SECTION("errors") {
    struct Row {
      const char* json;
      const char* message;
    };
    const std::vector<Row> rows = {
        {R"({"optimizer": {"type": "Adagrad"}})",
         R"(configs/x.json: optimizer.type: "Adagrad" is not supported (supported: "Adam", "AdamW", "Lamb", "SGD", "OneBitAdam", "ZeroOneAdam", "OneBitLamb"))"},
        {R"({"optimizer": {"params": {}}})", "optimizer.type: missing"},
        {R"({"optimizer": {"type": 1}})", "optimizer.type: expected a string, got 1"},
        {R"({"optimizer": {"type": "Adam", "params": {"lr": "abc"}}})",
         R"(configs/x.json: optimizer.params.lr: expected a number, got "abc")"},
        {R"({"optimizer": {"type": "Adam", "params": {"lr": true}}})",
         "optimizer.params.lr: expected a number, got true"},
        {R"({"optimizer": {"type": "Adam", "params": {"lr": -0.1}}})",
         "optimizer.params.lr: expected a number >= 0, got -0.1"},
        {R"({"optimizer": {"type": "Adam", "params": {"betas": [0.9]}}})",
         "optimizer.params.betas: expected an array of 2 numbers, got [0.9]"},
        {R"({"optimizer": {"type": "Adam", "params": {"betas": [0.9, "x"]}}})",
         R"(optimizer.params.betas[1]: expected a number, got "x")"},
        {R"({"optimizer": {"type": "Adam", "params": {"betas": [1.0, 0.9]}}})",
         "optimizer.params.betas[0]: expected a number in [0, 1), got 1.0"},
        {R"({"optimizer": {"type": "Adam", "params": {"adam_w_mode": 1}}})",
         "optimizer.params.adam_w_mode: expected true or false, got 1"},
        {R"({"optimizer": {"type": "Adam", "params": {"max_grad_norm": 1.0}}})",
         R"(optimizer.params.max_grad_norm: not supported as an optimizer parameter; use the top-level "gradient_clipping")"},
        {R"({"optimizer": {"type": "Adam", "params": {"amsgrad": true}}})",
         "optimizer.params.amsgrad: true is not implemented yet"},
        {R"({"optimizer": {"type": "Adam", "params": {"lr": 0.1, "betas1": 0.9}}})",
         R"(configs/x.json: unknown key "optimizer.params.betas1" (did you mean "optimizer.params.betas"?))"},
        {R"({"optimizer": {"type": "Adam", "params": []}})",
         "optimizer.params: expected an object, got []"},
        {R"({"optimizer": "Adam"})", R"(optimizer: expected an object, got "Adam")"},
    };
    for (const auto& r : rows) {
      const std::string json = std::string(R"({"train_batch_size": 4, )") + (r.json + 1);
      INFO(json);
      REQUIRE_THROWS_WITH(parse(json), Catch::Contains(r.message));
    }
  }
}

TEST_CASE("ds_config: scheduler block", "[config]") {
  const DeepSpeedConfig c = parse(R"({"train_batch_size": 4, "scheduler": {"type": "WarmupLR",
      "params": {"warmup_min_lr": 0, "warmup_max_lr": 0.002, "warmup_num_steps": 50,
                 "warmup_type": "linear", "last_batch_iteration": -1}}})");
  REQUIRE(c.scheduler.has_value());
  CHECK(c.scheduler->type == SchedulerType::WarmupLr);
  CHECK(c.scheduler->warmupLr.warmupMinLr == 0.0);
  CHECK(c.scheduler->warmupLr.warmupMaxLr == 0.002);
  CHECK(c.scheduler->warmupLr.warmupNumSteps == 50);
  CHECK(c.scheduler->warmupLr.warmupType == WarmupType::Linear);
  CHECK(c.scheduler->lastBatchIteration == -1);

  // No params block: all defaults; WarmupLR's warmup_max_lr then follows the optimizer's lr.
  const DeepSpeedConfig d = parse(R"({"train_batch_size": 4, "scheduler": {"type": "WarmupLR"}})");
  CHECK_FALSE(d.scheduler->warmupLr.warmupMaxLr.has_value());
  CHECK(d.scheduler->warmupLr.warmupNumSteps == 1000);
  CHECK(d.scheduler->warmupLr.warmupType == WarmupType::Log);

  const DeepSpeedConfig o = parse(R"({"train_batch_size": 4, "scheduler": {"type": "OneCycle",
      "params": {"cycle_min_lr": 0.001, "cycle_max_lr": 0.01}}})");
  CHECK(o.scheduler->type == SchedulerType::OneCycle);
  CHECK(o.scheduler->oneCycle.cycleMaxLr == 0.01);
  CHECK(o.scheduler->oneCycle.cycleMomentum);

  struct Row {
    const char* json;
    const char* message;
  };
  const std::vector<Row> rows = {
      {R"({"scheduler": {"type": "WarmupLR", "params": {"warmup_type": "cosine"}}})",
       R"(scheduler.params.warmup_type: expected "log" or "linear", got "cosine")"},
      {R"({"scheduler": {"type": "StepLR"}})",
       R"(scheduler.type: "StepLR" is not supported (supported: "WarmupLR", "WarmupDecayLR", )"
       R"("WarmupCosineLR", "OneCycle", "LRRangeTest"))"},
      {R"({"scheduler": {"type": "warmuplr"}})", R"(did you mean "WarmupLR"?)"},
      {R"({"scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": 10.5}}})",
       "scheduler.params.warmup_num_steps: expected an integer, got 10.5"},
      {R"({"scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": 0}}})",
       "scheduler.params.warmup_num_steps: expected an integer >= 1, got 0"},
      {R"({"scheduler": {"type": "WarmupLR", "params": {"warmup_max": 0.1}}})",
       R"(unknown key "scheduler.params.warmup_max" (did you mean "scheduler.params.warmup_max_lr"?))"},
  };
  for (const auto& r : rows) {
    const std::string json = std::string(R"({"train_batch_size": 4, )") + (r.json + 1);
    INFO(json);
    REQUIRE_THROWS_WITH(parse(json), Catch::Contains(r.message));
  }
}

TEST_CASE("ds_config: unknown keys warn with a suggestion, known ignored keys do not", "[config]") {
  const DeepSpeedConfig c = parse(R"({"train_batch_size": 4, "train_batch_sizes": 4,
      "fp16": {"enabled": false}, "bf16": {"enabled": false}, "activation_checkpointing": {},
      "flops_profiler": {}, "comms_logger": {}, "tensorboard": {}, "wandb": {}, "csv_monitor": {},
      "elasticity": {}, "aio": {}, "wall_clock_breakdown": false, "gradient_clipping": 1.0,
      "optimizer": {"type": "Adam", "params": {"lr": 0.1}, "parms": {}},
      "scheduler": {"type": "WarmupLR", "params": {"warmup_max_lr": 0.1}, "parms": {}},
      "zero_optimization": {"stage": 1, "stagee": 1, "overlap_comm": true,
                            "reduce_bucket_size": 5e8, "offload_optimizer": {}},
      "totally_unrelated_thing": 1})");
  CHECK(c.warnings.size() == 5);
  CHECK(hasWarning(
      c, R"(configs/x.json: unknown key "train_batch_sizes" (did you mean "train_batch_size"?))"));
  // Only the blocks' own keys warn; a typo inside optimizer.params is an error (see above).
  CHECK(hasWarning(c, R"(unknown key "optimizer.parms" (did you mean "optimizer.params"?))"));
  CHECK(hasWarning(c, R"(unknown key "scheduler.parms" (did you mean "scheduler.params"?))"));
  CHECK(hasWarning(
      c, R"(unknown key "zero_optimization.stagee" (did you mean "zero_optimization.stage"?))"));
  CHECK(hasWarning(c, R"(unknown key "totally_unrelated_thing")"));
  CHECK_FALSE(hasWarning(c, "totally_unrelated_thing\" (did you mean"));
  CHECK(c.gradientClipping == 1.0);
  CHECK(c.zero.stage == 1);
}

TEST_CASE("ds_config: integers, ZeRO stage, batch and JSON errors", "[config]") {
  struct Row {
    std::string json;
    int64_t world;
    std::string message;
  };
  const std::vector<Row> rows = {
      {R"({"train_batch_size": true})", 1, "train_batch_size: expected an integer, got true"},
      {R"({"train_batch_size": "8"})", 1, R"(train_batch_size: expected an integer, got "8")"},
      {R"({"train_micro_batch_size_per_gpu": 2.5})", 1,
       "train_micro_batch_size_per_gpu: expected a whole number, got 2.5"},
      {R"({"train_batch_size": 18446744073709551615})", 1, "train_batch_size: integer"},
      {R"({"train_batch_size": 32, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2})",
       3,
       "configs/x.json: Check batch related parameters. train_batch_size is not equal to "
       "micro_batch_per_gpu * gradient_acc_step * world_size: 32 != 4 * 2 * 3 (world size 3)"},
      {R"({"gradient_accumulation_steps": 2})", 1,
       "configs/x.json: Either train_batch_size or train_micro_batch_size_per_gpu needs to be "
       "provided"},
      {R"({"train_batch_size": 8, "train_micro_batch_size_per_gpu": 0})", 1,
       "train_micro_batch_size_per_gpu is 0"},
      {R"({"train_batch_size": 4, "fp16": {"enabled": true}, "bf16": {"enabled": true}})", 1,
       "configs/x.json: fp16.enabled: fp16 and bf16 cannot both be enabled; choose one"},
      {R"({"train_batch_size": 4, "amp": {"enabled": true}, "zero_optimization": {"stage": 2}})", 1,
       "amp.enabled: amp cannot be combined with ZeRO (stage 2)"},
      {R"({"train_batch_size": 4, "fp16": {"enabled": true, "hysteresis": 0}})", 1,
       "fp16.hysteresis: expected an integer >= 1, got 0"},
      {R"({"train_batch_size": 4, "data_types": {"grad_accum_dtype": "fp8"}})", 1,
       "data_types.grad_accum_dtype: expected \"fp32\", \"bf16\" or \"fp16\", got \"fp8\""},
      {R"({"train_batch_size": 4, "zero_optimization": {"stage": 3, "stage3_max_live_parameters": 5, "max_live_parameters": 6}})",
       1, "zero_optimization.stage3_max_live_parameters: given twice"},
      {R"({"train_batch_size": 4, "zero_optimization": {"stage": 2, "reduce_bucket_size": 0}})", 1,
       "zero_optimization.reduce_bucket_size: expected an integer >= 1, got 0"},
      {R"({"train_batch_size": 4, "zero_optimization": {"stage": 2, "reduce_bucket_size": 5.5}})",
       1, "zero_optimization.reduce_bucket_size: expected a whole number, got 5.5"},
      {R"({"train_batch_size": 4, "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "nvme"}}})",
       1, "zero_optimization.offload_optimizer.nvme_path: required"},
      {R"({"train_batch_size": 4, "zero_optimization": {"stage": 4}})", 1,
       "zero_optimization.stage: expected 0..3, got 4"},
      {R"({"train_batch_size": 4, "zero_optimization": {"stage": -1}})", 1,
       "zero_optimization.stage: expected 0..3, got -1"},
      {R"({"train_batch_size": 4, "zero_optimization": {"stage": 1.5}})", 1,
       "zero_optimization.stage: expected a whole number, got 1.5"},
      {R"({"train_batch_size": 1e400})", 1, "configs/x.json: invalid JSON: "},
      {R"({"train_batch_size": 4, "zero_optimization": 5})", 1,
       "zero_optimization: expected an object, got 5"},
      {R"({"train_batch_size": 4, "steps_per_print": 0})", 1,
       "steps_per_print: expected an integer >= 1, got 0"},
      {R"({"train_batch_size": 4, "gradient_clipping": -1})", 1,
       "gradient_clipping: expected a number >= 0, got -1"},
      {R"({"train_batch_size": 4, "gradient_clipping": "1.0"})", 1,
       R"(gradient_clipping: expected a number, got "1.0")"},
      {R"({"train_batch_size": 4,})", 1, "configs/x.json: invalid JSON at byte"},
      {"", 1, "configs/x.json: invalid JSON at byte 1"},
      {R"({"train_batch_size": 4, "train_batch_size": 8})", 1,
       R"(configs/x.json: duplicate key "train_batch_size")"},
      {R"([1, 2])", 1, "configs/x.json: expected a JSON object at the top level, got [1,2]"},
  };
  for (const auto& r : rows) {
    INFO(r.json);
    REQUIRE_THROWS_AS(parse(r.json, r.world), ds::Error);
    REQUIRE_THROWS_WITH(parse(r.json, r.world), Catch::Contains(r.message));
  }
}

TEST_CASE("ds_config: ZeRO forms that are accepted", "[config]") {
  CHECK(parse(R"({"train_batch_size": 4, "zero_optimization": {"stage": 0}})").zero.stage == 0);
  CHECK(parse(R"({"train_batch_size": 4, "zero_optimization": {}})").zero.stage == 0);
  const auto z = parse(
      R"({"train_batch_size": 4, "zero_optimization": {"stage": 3, "reduce_bucket_size": 1000,
          "overlap_comm": true, "stage3_max_live_parameters": 77, "prefetch_bucket_size": 9,
          "stage3_param_persistence_threshold": 0}, "fp16": {"enabled": true, "loss_scale_window": 50},
          "communication_data_type": "fp32", "data_types": {"grad_accum_dtype": "fp32"}})");
  CHECK(z.zero.stage == 3);
  CHECK(z.zero.reduceBucketSize == 1000);
  CHECK(z.zero.overlapComm);
  CHECK(z.zero.maxLiveParameters == 77);
  CHECK(z.zero.prefetchBucketSize == 9);
  CHECK(z.zero.paramPersistenceThreshold == 0);
  CHECK(z.zero.allgatherBucketSize == 500000000);
  CHECK(parse(R"({"train_batch_size": 4, "zero_optimization": {"reduce_bucket_size": 2e8}})")
            .zero.reduceBucketSize == 200000000);
  CHECK(z.precision.modelDtype == ds::DType::F16);
  CHECK(z.precision.lossScale.window == 50);
  CHECK(z.precision.lossScale.initialScalePower == 16);
  CHECK(z.precision.lossScale.hysteresis == 2);
  CHECK(z.precision.communicationDtype == ds::DType::F32);
  CHECK(z.precision.gradAccumDtype == ds::DType::F32);
  CHECK(parse(R"({"train_batch_size": 4, "bf16": {"enabled": true}})").precision.modelDtype ==
        ds::DType::BF16);
  CHECK(parse(R"({"train_batch_size": 4})").precision.modelDtype == ds::DType::F32);
  // Deprecated boolean form: true means stage 1, with a warning.
  const DeepSpeedConfig c = parse(R"({"train_batch_size": 4, "zero_optimization": true})");
  CHECK(c.zero.stage == 1);
  CHECK(hasWarning(c, "deprecated"));
}

TEST_CASE("loadDeepSpeedConfig reads files and names the path on failure", "[config]") {
  namespace fs = std::filesystem;
  const fs::path dir = ds::test::makeScratchDir("config");
  const fs::path good = dir / "ds_config.json";
  std::ofstream(good)
      << R"({"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 3})";
  const DeepSpeedConfig c = loadDeepSpeedConfig(good.string(), 4);
  CHECK(c.batch.trainBatchSize == 24);

  const fs::path bad = dir / "bad.json";
  std::ofstream(bad) << R"({"train_batch_size": 4, "steps_per_print": "x"})";
  REQUIRE_THROWS_WITH(loadDeepSpeedConfig(bad.string(), 1),
                      Catch::Contains(bad.string() + ": steps_per_print: expected an integer"));

  const std::string missing = (dir / "missing.json").string();
  REQUIRE_THROWS_WITH(loadDeepSpeedConfig(missing, 1),
                      Catch::Contains(missing + ": cannot open DeepSpeed config"));
  REQUIRE_THROWS_WITH(loadDeepSpeedConfig(dir.string(), 1), Catch::Contains("is a directory"));
  fs::remove_all(dir);
}

// Except the keys DeepSpeed itself refuses as floats (micro_batch_sizes, warmup_num_steps,
// lr_range_test_step_size: test_config_policy.cc, test_lr_schedules.cc).
TEST_CASE("ds_config: integral floats are the integers they denote wherever a count is expected",
          "[config]") {
  const auto c = parse(R"({"train_batch_size": 8.0, "gradient_accumulation_steps": 2e0,
      "steps_per_print": 5.0, "zero_optimization": {"stage": 2.0, "reduce_bucket_size": 5e8},
      "scheduler": {"type": "WarmupDecayLR", "params": {"total_num_steps": 40.0,
                                                       "warmup_num_steps": 10}}})",
                       2);
  CHECK(c.batch.trainBatchSize == 8);
  CHECK(c.batch.microBatchPerGpu == 2);
  CHECK(c.stepsPerPrint == 5);
  CHECK(c.zero.stage == 2);
  CHECK(c.zero.reduceBucketSize == 500000000);
  CHECK(c.scheduler->warmupDecayLr.totalNumSteps == 40);
  CHECK(c.scheduler->warmupDecayLr.warmupNumSteps == 10);
}

TEST_CASE("ds_config: hostile texts are refused, not crashed on", "[config]") {
  CHECK_THROWS_WITH(parse(std::string(100000, '[') + std::string(100000, ']')),
                    Catch::Contains("nested more than 64 levels deep"));
  CHECK_THROWS_WITH(parse(std::string(R"({"train_batch_size": 4})") + '\0' + "garbage"),
                    Catch::Contains("a NUL byte at offset 23"));
  CHECK_THROWS_WITH(loadDeepSpeedConfig("/dev/zero", 1),
                    Catch::Contains("/dev/zero: cannot read DeepSpeed config: is a character "
                                    "device, not a regular file"));
}
