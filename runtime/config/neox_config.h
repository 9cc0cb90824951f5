// GPT-NeoX-style YAML configs for the GPT job: one or more files merged in order (a key set by two
// files is an error, as in NeoX), each key in its hyphen or underscore spelling. Model keys fill a
// GptConfig, data/training keys a GptTrainConfig, and DeepSpeed's keys (inline, as NeoX writes
// them, or from a `deepspeed_config` JSON file) plus the NeoX keys that translate into them
// (batch-size, clip-grad, precision, lr, weight-decay, adam-*, loss-scale...) form the DeepSpeed
// config the engine runs with. A NeoX key this trainer does not implement is refused by name when
// it is switched on; an unknown key gets a "did you mean".
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/config/checkpoint_schedule.h"
#include "runtime/config/ds_config.h"
#include "runtime/config/parallel_config.h"
#include "runtime/data/data_blend.h"
#include "runtime/data/tokenizer.h"
#include "runtime/model/gpt_config.h"

namespace ds::runtime {

struct GptTrainConfig {
  GptConfig model;
  std::string dataPath;  // prefix of PREFIX.bin / PREFIX.idx
  std::string split = "969,30,1";
  // train-/valid-/test-data-paths with their -data-weights, instead of data-path and split.
  DataBlend trainData, validData, testData;
  BlendOptions blend;  // weight-by-num-documents, weighted-sampler-alpha
  bool blended() const { return !trainData.paths.empty(); }
  std::vector<std::string> dataPrefixes() const;  // every dataset the job reads or names
  std::string tokenizerType = "GPT2BPETokenizer";  // NeoX's default; ByteTokenizer by name
  std::string vocabFile, mergeFile;
  int64_t trainIters = 0;
  int64_t logInterval = 100;
  int64_t evalInterval = 1000;
  int64_t evalIters = 100;
  std::string save, load;
  int64_t saveInterval = 0;        // NeoX's old name for a linear checkpoint-factor
  CheckpointSchedule checkpoints;  // checkpoint-factor, -scale, extra-save-iters, keep-last-n
  int64_t exitInterval = 0;        // stop (after saving) at the first iteration divisible by it
  bool finetune = false;           // load weights only; start at iteration 0
  bool noLoadOptim = false;        // load weights and schedule position, not optimizer state
  uint64_t seed = 1234;
  ParallelConfig parallel;  // pipe-parallel-size, model-parallel-size, pipe-partition-method
};

struct NeoxConfig {
  GptTrainConfig train;
  DeepSpeedConfig deepspeed;       // with the NeoX lr schedule set as its scheduler
  std::vector<std::string> notes;  // keys accepted without effect here, one line each
};

// Reads and merges the YAML files into one JSON object with NeoX's hyphenated names for NeoX keys
// and DeepSpeed's underscored names for DeepSpeed keys; a deepspeed_config file is read into it.
// Throws ds::Error naming the file and key.
nlohmann::json readNeoxYaml(const std::vector<std::string>& paths);

// Whether parsing also checks that a rank's sample tables and activations fit in the memory this
// machine has left (runtime/config/gpt_job_memory.h): yes where the ranks run here (a rank, a
// local job, ds-config check), no where they run elsewhere (a launcher on a login node, whose
// memory says nothing of the compute nodes': each rank then checks its own).
enum class MemoryCheck { ThisMachine, Elsewhere };

// The merged object (readNeoxYaml's) -> the job's configuration for `worldSize` ranks, all of
// them (the batch rules divide by world / (pipe x model)); kOneReplica: as many as one copy of
// the model needs (pipe x model, x the sequence and expert-parallel sizes), for tools that only
// read the model's shape.
inline constexpr int64_t kOneReplica = 0;
NeoxConfig parseNeoxConfig(const nlohmann::json& merged, int64_t worldSize,
                           MemoryCheck memory = MemoryCheck::ThisMachine);

bool isNeoxConfigPath(const std::string& path);  // .yml / .yaml

// Whose key a config file's top-level `key` is, as readNeoxYaml reads it: DeepSpeed's (in its
// underscored spelling), NeoX's (in the key tables, hyphenated or underscored), or neither.
enum class ConfigKeyOwner { DeepSpeed, Neox, Unknown };
ConfigKeyOwner configKeyOwner(const std::string& key);

// The job's tokenizer (tokenizer-type, vocab-file, merge-file) and the model configuration with
// its vocabulary size. Reads the tokenizer's files; throws ds::Error naming them.
std::unique_ptr<Tokenizer> makeJobTokenizer(const GptTrainConfig& train);
GptConfig modelConfigFor(const GptTrainConfig& train, const Tokenizer& tokenizer);

}  // namespace ds::runtime
