// The autotuner's space: every configuration it may try for a job, as changes to the job's config
// (a DeepSpeed JSON, or the merged keys of NeoX files: both put DeepSpeed's keys at the top
// level). A key the user set to a number is kept; "auto", a list, "all" or (for the ZeRO stage and
// the GPT's layout) an absent key is the tuner's to choose. With fast (DeepSpeed's default) only
// the ZeRO stage and the micro-batch are tuned; otherwise also overlap_comm and the bucket sizes
// (ZeRO 1-3), activation checkpointing and pipe x model layouts (the GPT), and NVMe offload off
// where the config sets it on. Which of these the config rules accept and which fit in memory is
// decided later, by the launcher's own checks (launcher/autotuning/autotuner.cc).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "runtime/config/autotuning_config.h"

namespace ds::launcher {

struct TuningChoice {
  int stage = 0;
  int64_t micro = 1;
  int64_t accumulation = 1;
  std::optional<int64_t> trainBatch;  // set: the global batch the config fixes
  // Unset: as the config has it.
  std::optional<bool> overlapComm;
  std::optional<int64_t> reduceBucket;  // reduce_bucket_size and allgather_bucket_size
  std::optional<bool> checkpointActivations;
  int pipe = 1, model = 1;  // the GPT's layout (1 x 1 for a DeepSpeed JSON job)
  bool layoutTuned = false;
  bool offloadOff = false;  // the config's NVMe offload switched off
  // Whether this choice swaps to NVMe (the config's offload, where its stage takes it).
  bool optimizerOffload = false, paramOffload = false;

  // DeepSpeed's experiment names (z1_gas2_tmbspg4) with what else differs appended.
  std::string name() const;
  // "ZeRO 1, micro 4 x 2" and the rest: for tables.
  std::string describe() const;
};

// What the space depends on besides the config.
struct TuningJobShape {
  int world = 1;              // ranks of the job
  bool gpt = false;           // a NeoX config (the GPT trainer): layouts and checkpointing
  int layers = 0, heads = 0;  // the GPT's, for the layouts that divide them
  double parameters = 0;      // the model's, for the bucket sizes tried
};

// Every combination, in DeepSpeed's grid order (stage, then micro-batch, then the rest).
std::vector<TuningChoice> tuningSpace(const nlohmann::ordered_json& config,
                                      const runtime::AutotuningConfig& autotuning,
                                      const TuningJobShape& shape);

// The config of one experiment: `config` with the choice written in, the autotuning block the
// trainer reads (metric_path set: run the profile steps, write the metrics there), and the
// monitors and the flops profiler switched off.
nlohmann::ordered_json experimentConfig(const nlohmann::ordered_json& config,
                                        const TuningChoice& choice, const std::string& metricPath);
// The winner's config as a user trains with it: the choice written in, no autotuning block.
nlohmann::ordered_json tunedConfig(const nlohmann::ordered_json& config,
                                   const TuningChoice& choice);

// Without an autotuner (ds-config check --autotuning): the config with the tuned keys set as the
// first choice of its space, so that the rest of it can be checked.
nlohmann::ordered_json firstChoiceConfig(const nlohmann::ordered_json& config,
                                         const runtime::AutotuningConfig& autotuning,
                                         const TuningJobShape& shape);

}  // namespace ds::launcher
