// The configuration a training job ships from ds-launch to every rank, in either form: a DeepSpeed
// JSON file (the built-in MLP trainer) or GPT-NeoX YAML files (the GPT trainer, shipped as
// {"neox": merged keys} so that every rank parses exactly what the launcher validated).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "runtime/config/ds_config.h"
#include "runtime/config/neox_config.h"

namespace ds::runtime {

// Nesting of the shipped text: NeoX YAML of up to 64 levels (neox_config.cc) inside {"neox": ...},
// or a DeepSpeed JSON of up to 64. Also bounds the neox_config.json the GPT trainer saves.
constexpr int kMaxShippedConfigDepth = 128;

struct JobConfig {
  DeepSpeedConfig deepspeed;
  std::optional<GptTrainConfig> gpt;  // set for NeoX configs
  std::vector<std::string> notes;     // keys accepted without effect
};

// `paths`: one DeepSpeed JSON file, or one or more NeoX YAML files separated by commas
// ("base.yml,small.yml", merged in order). Returns the text to ship.
std::string readJobConfigText(const std::string& paths);
JobConfig parseJobConfig(const std::string& text, int64_t worldSize, const std::string& where,
                         MemoryCheck memory = MemoryCheck::ThisMachine);

}  // namespace ds::runtime
