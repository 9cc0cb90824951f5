// parseAutotuningConfig and the "auto" rules: see autotuning_config.h and auto_value.h.
#include "runtime/config/autotuning_config.h"

#include <algorithm>
#include <array>
#include <cstdio>

#include "common/trimmed.h"
#include "runtime/config/auto_value.h"
#include "runtime/config/config_blocks.h"

namespace ds::runtime {
namespace {

constexpr const char* kBlock = "autotuning";

// What ds-launch --autotuning chooses (launcher/autotuning/tuning_space.h), in both spellings a
// config may use (DeepSpeed's keys, NeoX's).
constexpr std::array<const char*, 11> kTunedKeys = {"train_micro_batch_size_per_gpu",
                                                    "gradient_accumulation_steps",
                                                    "train_batch_size",
                                                    "zero_optimization.stage",
                                                    "zero_optimization.overlap_comm",
                                                    "zero_optimization.reduce_bucket_size",
                                                    "zero_optimization.allgather_bucket_size",
                                                    "batch-size",
                                                    "checkpoint-activations",
                                                    "pipe-parallel-size",
                                                    "model-parallel-size"};

template <typename Enum>
Enum choose(const JsonReader& r, const Json& block, const char* key,
            const std::vector<std::pair<const char*, Enum>>& names, Enum fallback) {
  const Json* v = JsonReader::member(block, key);
  if (!v) return fallback;
  const std::string path = std::string(kBlock) + "." + key;
  const std::string given = r.string(*v, path);
  std::string expected;
  for (const auto& [name, value] : names) {
    if (given == name) return value;
    expected += std::string(expected.empty() ? "" : ", ") + "\"" + name + "\"";
  }
  r.fail(path, "expected one of " + expected + ", got " + describeJson(*v));
}

void readModelInfo(JsonReader& r, const Json& block, AutotuningConfig& a) {
  const Json* info = JsonReader::member(block, "model_info");
  if (!info) return;
  const std::string prefix = std::string(kBlock) + ".model_info";
  r.object(*info, prefix);
  r.warnUnknownKeys(*info, prefix, {"profile", "num_params", "hidden_size", "num_layers"});
  bool profile = false;
  r.readBool(*info, prefix, "profile", profile);  // the config sizes the model here: no profile
  if (const Json* n = JsonReader::member(*info, "num_params")) {
    const double count = r.number(*n, prefix + ".num_params");
    if (!(count > 0)) r.fail(prefix + ".num_params", "expected a parameter count > 0");
    a.modelParameters = count;
  }
  int64_t unused = 0;
  r.readInt(*info, prefix, "hidden_size", unused, 1);
  r.readInt(*info, prefix, "num_layers", unused, 1);
}

}  // namespace

const char* tuningMetricName(TuningMetric metric) {
  switch (metric) {
    case TuningMetric::Throughput:
      return "throughput";
    case TuningMetric::Latency:
      return "latency";
    case TuningMetric::Flops:
      return "flops";
  }
  return "?";
}

const char* tunerTypeName(TunerType type) {
  switch (type) {
    case TunerType::GridSearch:
      return "gridsearch";
    case TunerType::Random:
      return "random";
    case TunerType::ModelBased:
      return "model_based";
  }
  return "?";
}

AutotuningConfig parseAutotuningConfig(JsonReader& r, const Json& block) {
  AutotuningConfig a;
  r.object(block, kBlock);
  r.warnUnknownKeys(block, kBlock,
                    {"enabled",
                     "fast",
                     "results_dir",
                     "exps_dir",
                     "overwrite",
                     "start_profile_step",
                     "end_profile_step",
                     "metric",
                     "metric_path",
                     "tuner_type",
                     "tuner_early_stopping",
                     "tuner_num_trials",
                     "arg_mappings",
                     "max_train_batch_size",
                     "min_train_batch_size",
                     "max_train_micro_batch_size_per_gpu",
                     "min_train_micro_batch_size_per_gpu",
                     "num_tuning_micro_batch_sizes",
                     "mp_size",
                     "model_info",
                     "model_info_path"});
  r.readBool(block, kBlock, "enabled", a.enabled);
  r.readBool(block, kBlock, "fast", a.fast);
  r.readBool(block, kBlock, "overwrite", a.overwrite);
  for (auto [key, out] : {std::pair{"results_dir", &a.resultsDir},
                          {"exps_dir", &a.expsDir},
                          {"metric_path", &a.metricPath},
                          {"model_info_path", &a.modelInfoPath}})
    if (const Json* v = JsonReader::member(block, key)) {
      *out = r.string(*v, std::string(kBlock) + "." + key);
      if (out->empty()) r.fail(std::string(kBlock) + "." + key, "expected a path, got \"\"");
    }
  r.readInt(block, kBlock, "start_profile_step", a.startProfileStep, 0);
  r.readInt(block, kBlock, "end_profile_step", a.endProfileStep, 1);
  if (a.endProfileStep <= a.startProfileStep)
    r.fail(std::string(kBlock) + ".end_profile_step",
           "expected a step after start_profile_step (" + std::to_string(a.startProfileStep) +
               "), got " + std::to_string(a.endProfileStep) +
               ": the steps after start_profile_step up to end_profile_step are timed");
  a.metric = choose<TuningMetric>(r, block, "metric",
                                  {{"throughput", TuningMetric::Throughput},
                                   {"latency", TuningMetric::Latency},
                                   {"flops", TuningMetric::Flops}},
                                  a.metric);
  a.tunerType = choose<TunerType>(r, block, "tuner_type",
                                  {{"gridsearch", TunerType::GridSearch},
                                   {"random", TunerType::Random},
                                   {"model_based", TunerType::ModelBased}},
                                  a.tunerType);
  r.readInt(block, kBlock, "tuner_early_stopping", a.tunerEarlyStopping, 1);
  r.readInt(block, kBlock, "tuner_num_trials", a.tunerNumTrials, 1);
  if (JsonReader::member(block, "max_train_batch_size")) {
    int64_t max = 0;
    r.readInt(block, kBlock, "max_train_batch_size", max, 1);
    a.maxTrainBatchSize = max;
  }
  r.readInt(block, kBlock, "min_train_batch_size", a.minTrainBatchSize, 1);
  r.readInt(block, kBlock, "max_train_micro_batch_size_per_gpu", a.maxMicroBatch, 1);
  r.readInt(block, kBlock, "min_train_micro_batch_size_per_gpu", a.minMicroBatch, 1);
  if (a.minMicroBatch > a.maxMicroBatch)
    r.fail(std::string(kBlock) + ".min_train_micro_batch_size_per_gpu",
           "expected at most max_train_micro_batch_size_per_gpu (" +
               std::to_string(a.maxMicroBatch) + "), got " + std::to_string(a.minMicroBatch));
  r.readInt(block, kBlock, "num_tuning_micro_batch_sizes", a.numTuningMicroBatchSizes, 1);
  r.readInt(block, kBlock, "mp_size", a.mpSize, 1);
  if (const Json* m = JsonReader::member(block, "arg_mappings")) {
    const std::string prefix = std::string(kBlock) + ".arg_mappings";
    r.object(*m, prefix);
    for (const auto& [key, flag] : m->items()) {
      const std::string path = prefix + "." + key;
      const std::string name = trimmed(r.string(flag, path));
      if (name.empty()) r.fail(path, "expected a program flag such as \"--batch_size\"");
      if (!isTunedKey(trimmed(key)))
        r.fail(path, "the autotuner does not choose \"" + trimmed(key) +
                         "\"; map train_micro_batch_size_per_gpu or "
                         "gradient_accumulation_steps");
      a.argMappings.emplace_back(trimmed(key), name);
    }
  }
  readModelInfo(r, block, a);
  return a;
}

AutotuningConfig readAutotuningBlock(const std::string& blockJson, const std::string& source) {
  std::vector<std::string> warnings;
  JsonReader r(source, warnings);
  AutotuningConfig a = parseAutotuningConfig(r, Json::parse(blockJson));
  for (const std::string& w : warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  return a;
}

bool isTunedKey(const std::string& path) {
  return std::find(kTunedKeys.begin(), kTunedKeys.end(), path) != kTunedKeys.end();
}

std::string autoValueMessage(const std::string& path) {
  if (isTunedKey(path))
    return "\"auto\" is for an autotuner to choose: run ds-launch --autotuning tune (or run) "
           "with an \"autotuning\" block in the config (ds-config check --autotuning checks such "
           "a config), or set a value here";
  return "\"auto\" is a value Hugging Face's Trainer fills in from its own arguments; the "
         "autotuner does not choose it: set a value here";
}

}  // namespace ds::runtime
