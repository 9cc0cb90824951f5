// The config policy: every key a config sets is honoured, without effect here, an observer we do
// not provide (warning) or a feature not implemented (an error when switched on, naming the key and
// how to switch it off); values of unimplemented blocks are still type-checked. The elasticity
// block is validated with DeepSpeed's rules.
#include <catch2/catch.hpp>
#include <string>

#include "common/error.h"
#include "runtime/config/ds_config.h"

using namespace ds::runtime;

namespace {

DeepSpeedConfig parse(const std::string& extra) {
  return parseDeepSpeedConfig(R"({"train_batch_size": 4, )" + extra + "}", 1, "c.json");
}

bool warned(const DeepSpeedConfig& c, const std::string& text) {
  for (const auto& w : c.warnings)
    if (w.find(text) != std::string::npos) return true;
  return false;
}

// A config text and a part of the message its refusal must carry.
struct Refusal {
  const char* json;
  const char* message;
};

// Each of `cases` refused by `refuse(json)`: a ds::Error whose message contains the case's.
template <class Cases, class Refuse>
void checkRefusals(const Cases& cases, Refuse refuse) {
  for (const Refusal& c : cases) {
    INFO(c.json);
    CHECK_THROWS_AS(refuse(c.json), ds::Error);
    CHECK_THROWS_WITH(refuse(c.json), Catch::Contains(c.message));
  }
}

}  // namespace

TEST_CASE("config policy: features switched on but not implemented are errors naming the key") {
  const Refusal cases[] = {
      {R"("wandb": {"enabled": true})", "wandb: the Weights & Biases monitor is not implemented"},
      {R"("activation_checkpointing": {"partition_activations": true})",
       "activation_checkpointing: activation checkpointing is not implemented"},
      {R"("sparse_attention": {"mode": "fixed"})", "sparse_attention: sparse attention"},
      {R"("sparse_gradients": true)", "sparse_gradients: sparse gradients are not implemented"},
      {R"("compression_training": {"weight_quantization": {"shared_parameters": {"enabled": true}}})",
       "compression_training: compression training is not implemented"},
      {R"("data_efficiency": {"enabled": true})", "data_efficiency: data efficiency"},
      {R"("curriculum_learning": {"enabled": true})", "curriculum_learning: curriculum learning"},
      {R"("checkpoint": {"load_universal": true})", "checkpoint: universal checkpoints"},
      {R"("sequence_parallel_size": 2)",
       "sequence_parallel_size: DeepSpeed-Ulysses is the GPT trainer's"},
      {R"("fp16": {"enabled": true, "auto_cast": true})", "fp16.auto_cast: casting module inputs"},
      {R"("zero_optimization": {"stage": 3, "zero_quantized_nontrainable_weights": true})",
       "zero_optimization.zero_quantized_nontrainable_weights: int8 storage of non-trainable "
       "weights is not implemented"},
      {R"("zero_optimization": {"stage": 3, "zeropp_loco_param": {"err_beta": 0.8}})",
       "zero_optimization.zeropp_loco_param: LoCo error feedback"},
      {R"("zero_optimization": {"stage": 3, "stage3_gather_16bit_weights_on_model_save": true})",
       "zero_optimization.stage3_gather_16bit_weights_on_model_save: saving consolidated"},
      {R"("zero_optimization": {"stage": 2, "offload_param": {"device": "nvme"}})",
       "zero_optimization.offload_param: parameter offload needs ZeRO stage 3"},
      {R"("zero_optimization": {"stage": 2, "cpu_offload_param": true})",
       "zero_optimization.cpu_offload_param: parameter offload needs ZeRO stage 3"},
      {R"("zero_optimization": {"stage": 1, "load_from_fp32_weights": false})",
       "zero_optimization.load_from_fp32_weights"},
  };
  checkRefusals(cases, parse);
}

TEST_CASE("config policy: the same blocks switched off are accepted and recorded") {
  const DeepSpeedConfig c = parse(
      R"("tensorboard": {"enabled": false, "output_path": "tb"}, "wandb": {"enabled": false},
         "flops_profiler": {"enabled": false, "profile_step": 1}, "sparse_gradients": false,
         "compression_training": {"weight_quantization": {"shared_parameters": {"enabled": false}}},
         "checkpoint": {"tag_validation": "Warn"}, "sequence_parallel_size": 1,
         "zero_optimization": {"stage": 2, "zero_hpz_partition_size": 1,
                               "offload_optimizer": {"device": "none"}},
         "aio": {"block_size": 1048576, "queue_depth": 8}, "zero_allow_untested_optimizer": true,
         "elasticity": {"enabled": false, "max_train_batch_size": 64})");
  auto verdict = [&](const std::string& path) -> const KeyVerdict* {
    for (const auto& v : c.keyEffects)
      if (v.path == path) return &v;
    return nullptr;
  };
  REQUIRE(verdict("wandb"));
  CHECK(verdict("wandb")->effect == KeyEffect::NotImplemented);
  CHECK_FALSE(verdict("wandb")->active);
  CHECK(verdict("tensorboard")->effect == KeyEffect::Honoured);
  CHECK(verdict("aio")->effect == KeyEffect::Honoured);
  CHECK(verdict("zero_optimization")->effect == KeyEffect::Honoured);
  CHECK(verdict("train_batch_size")->effect == KeyEffect::Honoured);
  CHECK(verdict("memory_breakdown") == nullptr);  // not set, not listed
}

TEST_CASE("config policy: values of unimplemented blocks are still type-checked") {
  CHECK_THROWS_WITH(parse(R"("tensorboard": {"enabled": "yes"})"),
                    Catch::Contains("tensorboard.enabled: expected true or false"));
  CHECK_THROWS_WITH(parse(R"("wandb": true)"),
                    Catch::Contains("wandb: expected an object, got true"));
  CHECK_THROWS_WITH(parse(R"("aio": {"queue_depth": "8"})"),
                    Catch::Contains("aio.queue_depth: expected an integer"));
  CHECK_THROWS_WITH(
      parse(R"("zero_optimization": {"zero_quantized_weights": 1})"),
      Catch::Contains("zero_optimization.zero_quantized_weights: expected true or false"));
  CHECK_THROWS_WITH(parse(R"("sequence_parallel_size": 1.5)"),
                    Catch::Contains("sequence_parallel_size: expected an integer"));
}

TEST_CASE("config policy: csv_monitor is honoured, its values checked") {
  const DeepSpeedConfig c = parse(R"("csv_monitor": {"enabled": true, "output_path": "o", "job_name": "j"})");
  CHECK(c.csvMonitor.enabled);
  CHECK(c.csvMonitor.outputPath == "o");
  CHECK(c.csvMonitor.jobName == "j");
  CHECK(parse(R"("csv_monitor": {"enabled": true})").csvMonitor.jobName == "DeepSpeedJobName");
  CHECK_THROWS_WITH(parse(R"("csv_monitor": {"enabled": "yes"})"),
                    Catch::Contains("csv_monitor.enabled: expected true or false"));
  CHECK_THROWS_WITH(parse(R"("csv_monitor": {"enabled": true, "job_name": "a/b"})"),
                    Catch::Contains("csv_monitor.job_name: expected a directory name"));
}

TEST_CASE("config policy: observers we do not provide are warnings") {
  const DeepSpeedConfig c = parse(R"("memory_breakdown": true)");
  CHECK(warned(c, "memory_breakdown: memory breakdown printing is not provided"));
}

TEST_CASE("config policy: fp32_allreduce is communication_data_type fp32") {
  CHECK(
      parse(R"("fp32_allreduce": true, "bf16": {"enabled": true})").precision.communicationDtype ==
      ds::DType::F32);
  CHECK_FALSE(parse(R"("fp32_allreduce": false)").precision.communicationDtype.has_value());
  CHECK_THROWS_WITH(parse(R"("fp32_allreduce": true, "communication_data_type": "bf16")"),
                    Catch::Contains("fp32_allreduce: true contradicts communication_data_type"));
}

TEST_CASE("config policy: every rule is documented in the table") {
  const auto table = configPolicyTable();
  CHECK(table.size() > 60);
  for (const auto& rule : table) {
    INFO(rule.path);
    CHECK_FALSE(rule.note.empty());
  }
}

TEST_CASE("elasticity: DeepSpeed's keys, defaults and rules") {
  const DeepSpeedConfig d = parse(R"("elasticity": {})");
  CHECK(d.elasticity.maxTrainBatchSize == 2000);
  CHECK(d.elasticity.microBatchSizes == std::vector<int64_t>{2, 4, 6});
  CHECK(d.elasticity.version == 0.2);
  const DeepSpeedConfig e = parse(
      R"("elasticity": {"enabled": false, "max_train_batch_size": 10000,
          "micro_batch_sizes": [8, 12, 16, 17], "min_gpus": 32, "max_gpus": 1500,
          "min_time": 20, "version": 0.1, "prefer_larger_batch": false,
          "ignore_non_elastic_batch_info": true, "num_gpus_per_node": 8})");
  CHECK(e.elasticity.microBatchSizes == std::vector<int64_t>{8, 12, 16, 17});
  CHECK(e.elasticity.minGpus == 32);
  CHECK(e.elasticity.version == 0.1);
  CHECK_FALSE(e.elasticity.preferLargerBatch);

  const Refusal cases[] = {
      // The reference's own example: "seqlen" is a placeholder, not a number.
      {R"("elasticity": {"enabled": true, "max_train_batch_size": "seqlen", "micro_batch_sizes": [8]})",
       "elasticity.max_train_batch_size: expected an integer, got \"seqlen\""},
      {R"("elasticity": {"enabled": true, "micro_batch_sizes": [2]})",
       "elasticity.max_train_batch_size: missing (required when elasticity is enabled)"},
      {R"("elasticity": {"enabled": true, "max_train_batch_size": 8})",
       "elasticity.micro_batch_sizes: missing"},
      {R"("elasticity": {"micro_batch_sizes": 5})",
       "elasticity.micro_batch_sizes: expected a list"},
      {R"("elasticity": {"micro_batch_sizes": [2, 0.5]})",
       "elasticity.micro_batch_sizes[1]: expected an integer, got 0.5"},
      // DeepSpeed: "Elasticity expected micro_batch_sizes to only contain a list of integers".
      {R"("elasticity": {"enabled": true, "max_train_batch_size": 8, "micro_batch_sizes": [2.0, 4]})",
       "elasticity.micro_batch_sizes[0]: expected an integer, got 2.0 (DeepSpeed refuses a float "
       "here too); write 2"},
      // Every element's type is checked before any element's sign, as DeepSpeed does.
      {R"("elasticity": {"micro_batch_sizes": [0, 4e0]})",
       "elasticity.micro_batch_sizes[1]: expected an integer, got 4.0"},
      {R"("elasticity": {"micro_batch_sizes": [2, 0]})",
       "elasticity.micro_batch_sizes[1]: expected a positive integer, got 0"},
      {R"("elasticity": {"micro_batch_sizes": []})", "expected at least one micro batch size"},
      {R"("elasticity": {"min_gpus": 0})", "min_gpus and max_gpus must be > 0, given min_gpus 0"},
      {R"("elasticity": {"min_gpus": 8, "max_gpus": 4})", "min_gpus 8 is greater than max_gpus 4"},
      {R"("elasticity": {"model_parallel_size": 0})",
       "elasticity.model_parallel_size: expected an integer >= 1"},
      {R"("elasticity": {"num_gpus_per_node": 0})",
       "elasticity.num_gpus_per_node: expected an integer >= 1"},
      {R"("elasticity": {"min_time": -1})", "elasticity.min_time: expected an integer >= 0"},
      {R"("elasticity": {"version": 0.3})", "elasticity.version: elasticity version 0.3 is newer"},
      {R"("elasticity": {"version": 0.15})", "no elasticity algorithm for version 0.15"},
      {R"("elasticity": {"version": "abc"})", "elasticity.version: expected 0.1 or 0.2"},
      {R"("elasticity": {"version": 0.1, "model_parallel_size": 2})",
       "version 0.1 does not support model parallelism"},
      {R"("elasticity": {"prefer_larger_batch": "yes"})",
       "elasticity.prefer_larger_batch: expected true or false"},
  };
  checkRefusals(cases, parse);
  CHECK(parse(R"("elasticity": {"version": "0.1"})").elasticity.version == 0.1);
}

// DeepSpeed's ensure_immutable_elastic_config: only max_train_batch_size, micro_batch_sizes (in
// order) and version are compared, in that order, with DeepSpeed's field names in the message.
TEST_CASE("elasticity: the block the scheduler saw must match the one the runtime runs") {
  const DeepSpeedConfig runtime = parse(R"("elasticity": {"enabled": true,
      "max_train_batch_size": 48, "micro_batch_sizes": [2, 4], "version": 0.1,
      "ignore_non_elastic_batch_info": true})");
  const ElasticityConfig& e = runtime.elasticity;
  const std::string given = R"({"enabled": true, "max_train_batch_size": 48,
      "micro_batch_sizes": [2, 4], "version": 0.1, "ignore_non_elastic_batch_info": true})";
  CHECK_NOTHROW(ensureImmutableElasticConfig(given, e, "cfg.json"));
  CHECK_NOTHROW(ensureImmutableElasticConfig(runtime.elasticityJson, e, "cfg.json"));
  // Fields DeepSpeed does not compare may differ; 48.0 and "0.1" are the same values here.
  CHECK_NOTHROW(ensureImmutableElasticConfig(
      R"({"enabled": true, "max_train_batch_size": 48.0, "micro_batch_sizes": [2, 4],
          "version": "0.1", "min_gpus": 2, "max_gpus": 8, "prefer_larger_batch": false})",
      e, "cfg.json"));

  const Refusal cases[] = {
      {R"({"enabled": true, "max_train_batch_size": 27, "micro_batch_sizes": [2, 4],
           "version": 0.1})",
       "cfg.json: elasticity.max_train_batch_size: elastic config 'max_acceptable_batch_size=27' "
       "seen by the resource scheduler (DEEPSPEED_ELASTICITY_CONFIG) does not match "
       "max_acceptable_batch_size=48 in the config passed to the runtime; the config changed "
       "after the job was scheduled: restore it, or relaunch the job so that the scheduler sees "
       "this one"},
      {R"({"enabled": true, "max_train_batch_size": 48, "micro_batch_sizes": [4, 2],
           "version": 0.1})",
       "elasticity.micro_batch_sizes: elastic config 'micro_batches=[4, 2]' seen by the resource "
       "scheduler (DEEPSPEED_ELASTICITY_CONFIG) does not match micro_batches=[2, 4]"},
      {R"({"enabled": true, "max_train_batch_size": 48, "micro_batch_sizes": [2, 4]})",
       "elasticity.version: elastic config 'version=0.2' seen by the resource scheduler "
       "(DEEPSPEED_ELASTICITY_CONFIG) does not match version=0.1"},
      // The first difference in DeepSpeed's order is the one named.
      {R"({"enabled": true, "max_train_batch_size": 16, "micro_batch_sizes": [8],
           "version": 0.2})",
       "'max_acceptable_batch_size=16'"},
      // Without "enabled" the scheduler's block takes DeepSpeed's defaults (2000, [2, 4, 6]).
      {R"({"max_train_batch_size": 48})", "'micro_batches=[2, 4, 6]'"},
      // DeepSpeed's own test puts the whole config there; the defaults then differ.
      {R"({"train_batch_size": 4, "elasticity": {"enabled": true, "max_train_batch_size": 48,
           "micro_batch_sizes": [2, 4], "version": 0.1}})",
       "'max_acceptable_batch_size=2000' seen by the resource scheduler "
       "(DEEPSPEED_ELASTICITY_CONFIG) does not match max_acceptable_batch_size=48 in the config "
       "passed to the runtime; the variable holds a whole config: set it to the config's "
       "elasticity block alone"},
      // The scheduler's block is validated as DeepSpeed's ElasticityConfig validates it.
      {R"({"enabled": true, "max_train_batch_size": 48, "micro_batch_sizes": [2.0, 4]})",
       "DEEPSPEED_ELASTICITY_CONFIG: elasticity.micro_batch_sizes[0]: expected an integer"},
      {R"({"enabled": true, "micro_batch_sizes": [2]})",
       "DEEPSPEED_ELASTICITY_CONFIG: elasticity.max_train_batch_size: missing"},
      {"[1, 2]", "DEEPSPEED_ELASTICITY_CONFIG: elasticity: expected an object, got [1,2]"},
      {"{not json", "DEEPSPEED_ELASTICITY_CONFIG: "},
  };
  checkRefusals(cases, [&](const char* scheduler) {
    ensureImmutableElasticConfig(scheduler, e, "cfg.json");
  });
}

TEST_CASE("config policy: the flops_profiler block is read with DeepSpeed's keys and types") {
  const DeepSpeedConfig c = parse(R"("flops_profiler": {"enabled": true, "profile_step": 5,
      "module_depth": 2, "top_modules": 3, "detailed": false, "output_file": "p.txt"})");
  CHECK(c.flopsProfiler.enabled);
  CHECK(c.flopsProfiler.profileStep == 5);
  CHECK(c.flopsProfiler.moduleDepth == 2);
  CHECK(c.flopsProfiler.topModules == 3);
  CHECK_FALSE(c.flopsProfiler.detailed);
  CHECK(c.flopsProfiler.outputFile == "p.txt");
  CHECK_THROWS_WITH(parse(R"("flops_profiler": {"profile_step": "one"})"),
                    Catch::Contains("flops_profiler.profile_step"));
  CHECK_THROWS_WITH(parse(R"("flops_profiler": {"top_modules": 0})"),
                    Catch::Contains("flops_profiler.top_modules"));
}
