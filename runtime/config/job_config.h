// The configuration a training job ships from ds-launch to every rank, in either form: a DeepSpeed
// JSON file (the built-in MLP trainer) or GPT-NeoX config files, YAML or JSON (the GPT trainer,
// shipped as {"neox": merged keys} so that every rank parses exactly what the launcher validated).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/device_kind.h"
#include "runtime/config/ds_config.h"
#include "runtime/config/neox_config.h"

namespace ds::runtime {

// Nesting of the shipped text: NeoX YAML of up to 64 levels (neox_config.cc) inside {"neox": ...},
// or a DeepSpeed JSON of up to 64. Also bounds the neox_config.json the GPT trainer saves.
constexpr int kMaxShippedConfigDepth = 128;

// The built-in MLP trainer's model (a DeepSpeed JSON job's: worker/train_job.cc), its layer sizes
// here so that the launcher's tools can size it without building it.
inline const std::vector<int> kBuiltInMlpLayers = {16, 64, 64, 4};
double builtInMlpParameters();  // weights and biases of kBuiltInMlpLayers

struct JobConfig {
  DeepSpeedConfig deepspeed;
  std::optional<GptTrainConfig> gpt;  // set for NeoX configs
  std::vector<std::string> notes;     // keys accepted without effect
};

// The files as given: each value may itself be a comma list ("a.yml, b.yml"); spaces around the
// commas are trimmed and empty items dropped. Order is kept.
std::vector<std::string> splitConfigPaths(const std::vector<std::string>& given);
std::string configPathsText(const std::vector<std::string>& given);  // "a.yml, b.yml", for messages

// `given` (split as above): one DeepSpeed JSON file, or one or more NeoX config files merged in
// order. A .yml/.yaml file is NeoX; any other file is read by its top-level keys (NeoX keys, in
// either spelling, with or without DeepSpeed keys beside them: NeoX; DeepSpeed keys only:
// DeepSpeed); a file whose keys fit neither, or mostly DeepSpeed's with a few NeoX ones, is
// refused naming the file and keys. Returns the text to ship.
std::string readJobConfigText(const std::vector<std::string>& given);
// Whether `text` (readJobConfigText's) is NeoX's merged keys wrapped as {"neox": ...}; a
// DeepSpeed JSON otherwise.
bool isShippedNeoxText(const std::string& text);
// worldSize: every rank of the job, or kOneReplica (one rank of a DeepSpeed JSON job, pipe x
// model ranks of a NeoX one).
JobConfig parseJobConfig(const std::string& text, int64_t worldSize, const std::string& where,
                         MemoryCheck memory = MemoryCheck::ThisMachine);

// What the built-in trainer (ds-launch's train job) refuses of a config that DeepSpeed's runtime
// takes: the flops profiler on the MLP job (it profiles the GPT). ds-launch asks before it starts
// the ranks, each rank again; ds-config check cannot, not knowing which program reads the config.
void checkBuiltInTrainer(const JobConfig& job);
// Throws ds::Error where the job's trainer does not run on `device`, naming `where` (the flag or
// the variable that chose it): on cuda, the MLP trainer (a DeepSpeed JSON config), and a GPT on a
// pipe, model or sequence grid above 1, with MoE layers or ScaleNorm (what its passes and the
// engine's pipeline refuse on such a device at every rank: runtime/model/gpt.h). Each rank says
// when no GPU is visible.
void checkTrainingDevice(const JobConfig& job, DeviceKind device, const std::string& where);

}  // namespace ds::runtime
