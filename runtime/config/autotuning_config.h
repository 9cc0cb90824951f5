// DeepSpeed's "autotuning" block, with its keys, defaults and meanings (deepspeed/autotuning/
// constants.py); parsed by parseAutotuningConfig (config_blocks.h). ds-launch --autotuning reads
// it (launcher/autotuning/); a trainer that finds autotuning.metric_path set runs the profile
// steps only and writes DeepSpeed's metric file there (runtime/train/autotuning_profile.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ds::runtime {

enum class TuningMetric { Throughput, Latency, Flops };
enum class TunerType { GridSearch, Random, ModelBased };

const char* tuningMetricName(TuningMetric metric);  // "throughput", "latency", "flops"
const char* tunerTypeName(TunerType type);          // "gridsearch", "random", "model_based"

struct AutotuningConfig {
  bool enabled = false;
  bool fast = true;  // tune the ZeRO stage and the micro-batch only
  std::string resultsDir = "autotuning_results";
  std::string expsDir = "autotuning_exps";
  bool overwrite = true;  // start from empty directories (false: reuse finished experiments)
  // Steps (counted from 1) timed by an experiment: those after start_profile_step up to and
  // including end_profile_step.
  int64_t startProfileStep = 3, endProfileStep = 5;
  TuningMetric metric = TuningMetric::Throughput;
  std::string metricPath;  // set: run the profile steps only and write the metric file here
  TunerType tunerType = TunerType::GridSearch;
  int64_t tunerEarlyStopping = 5;  // stop after this many experiments without a better one
  int64_t tunerNumTrials = 50;     // at most this many experiments
  // A config key (train_micro_batch_size_per_gpu, gradient_accumulation_steps) -> the program's
  // flag that must carry the tuned value (e.g. --per_device_train_batch_size); keys and flags
  // trimmed, as DeepSpeed trims them.
  std::vector<std::pair<std::string, std::string>> argMappings;
  std::optional<int64_t> maxTrainBatchSize;  // the global batch a micro-batch choice may reach
  int64_t minTrainBatchSize = 1;             // read and checked; DeepSpeed does not use it
  int64_t maxMicroBatch = 1024, minMicroBatch = 1;
  int64_t numTuningMicroBatchSizes = 3;  // micro-batch sizes tried per ZeRO stage
  int64_t mpSize = 1;                    // the model-parallel size of a program's model
  // model_info: a program's parameter count (what prunes its candidates by memory).
  std::optional<double> modelParameters;
  std::string modelInfoPath;  // read and checked; the model is sized from its config here
};

// The block given as JSON text (`source` names it in messages): what ds-launch --autotuning
// reads before the rest of the config can be parsed (its "auto" values are still to be chosen).
AutotuningConfig readAutotuningBlock(const std::string& blockJson, const std::string& source);

}  // namespace ds::runtime
