// GPT-NeoX's own model configs (test/neox/configs, unchanged copies), read as a NeoX user gives
// them: the model file, llama/train_config.yml for the model files without training settings, and
// NeoX's local_setup.yml where the model file sets none of its keys. Only file paths are pointed at
// test files. Every config must be accepted by `ds-config check` as a user runs it (on this
// machine, whose memory is only a warning), except the features this trainer does not have yet,
// each refused by name, and the README must say how many.
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/error.h"
#include "runtime/config/neox_config.h"
#include "runtime/model/gpt.h"
#include "test/bpe_test_files.h"
#include "test/run_command.h"
#include "test/scratch_dir.h"

using namespace ds::runtime;
namespace fs = std::filesystem;
using Json = nlohmann::json;

namespace {

const fs::path kConfigs = fs::path(DS_SOURCE_DIR) / "test" / "neox" / "configs";

// The features NeoX configs use that this trainer does not have yet: the config -> the refusal's
// start.
const std::map<std::string, std::string> kRefused = {
    {"1-3B-transformer-engine.yml", "te-layernorm-mlp: NVIDIA Transformer Engine layers"},
    {"bnb_125M.yml", "use-bnb-optimizer: bitsandbytes' 8-bit optimizers"},
    {"finetuning_configs/6-9B.yml",
     "NeoX config (DeepSpeed keys): zero_optimization.load_from_fp32_weights: loading 16-bit"},
    // Broken in NeoX itself: keys NeoX's loader does not know (its NeoXArgs(**config) raises
    // TypeError), and an MLP whose gated halves (9558 / 2) do not fit its 4778-input projection.
    {"llemma/7B.yml", "decay-lr-to: unknown NeoX or DeepSpeed config key"},
    {"llemma/34B.yml", "attention-type: unknown NeoX or DeepSpeed config key"},
    {"mistral/7B.yml",
     "intermediate-size/mlp-multiple-of: NeoX's rounding gives dense_h_to_4h 9558"},
    {"gmlp_small.yml", "attention-config: "},
    {"sparse.yml", "attention-config: "},
    {"mamba/mamba-130M.yml", "attention-config: "},
    {"mamba/mamba-370M.yml", "attention-config: "},
    {"mamba/mamba-790M.yml", "attention-config: "},
    {"mamba/mamba-1.4B.yml", "attention-config: "},
    {"mamba/mamba-2.8B.yml", "attention-config: "},
    {"rwkv/170M.yml", "attention-config: "},
};

// Not model configs: files given beside one.
bool isSetupFile(const std::string& name) {
  return name == "local_setup.yml" || name == "llama/train_config.yml";
}

std::vector<std::string> modelConfigs() {
  std::vector<std::string> out;
  for (const auto& entry : fs::recursive_directory_iterator(kConfigs)) {
    if (entry.path().extension() != ".yml") continue;
    const std::string name = entry.path().lexically_relative(kConfigs).generic_string();
    if (!isSetupFile(name)) out.push_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The files a NeoX user would give with `model`.
std::vector<std::string> filesFor(const std::string& model) {
  std::vector<std::string> files = {(kConfigs / model).string()};
  // NeoX's LLaMA-family model files leave the training settings to llama/train_config.yml.
  if (!readNeoxYaml(files).contains("train-iters"))
    files.push_back((kConfigs / "llama" / "train_config.yml").string());
  const Json own = readNeoxYaml(files);
  const Json setup = readNeoxYaml({(kConfigs / "local_setup.yml").string()});
  bool clash = false;
  for (auto& [key, value] : setup.items()) clash = clash || own.contains(key);
  if (!clash && !own.contains("train-data-paths"))
    files.push_back((kConfigs / "local_setup.yml").string());
  return files;
}

// Points every file path the merged config sets (or needs) at test files in `dir`.
void pointPathsAt(Json& merged, const fs::path& dir, const ds::test::SmallBpe& bpe) {
  for (const char* key : {"save", "load", "tensorboard-dir", "log-dir"})
    if (merged.contains(key)) merged[key] = (dir / key).string();
  for (const char* key : {"train-data-paths", "valid-data-paths", "test-data-paths"})
    if (merged.contains(key))
      for (Json& path : merged[key]) path = (dir / "data").string();
  if (!merged.contains("train-data-paths")) merged["data-path"] = (dir / "data").string();
  const std::string tokenizer = merged.value("tokenizer-type", "GPT2BPETokenizer");
  const fs::path golden = fs::path(DS_SOURCE_DIR) / "test" / "golden";
  if (tokenizer == "GPT2BPETokenizer") {
    merged["vocab-file"] = bpe.vocabFile;
    merged["merge-file"] = bpe.mergeFile;
  } else if (tokenizer == "HFTokenizer") {
    merged["vocab-file"] = (golden / "hf_tokenizer.json").string();
  } else if (tokenizer == "SPMTokenizer") {
    merged["vocab-file"] = (golden / "spm_llama_like.model").string();
  }
}

}  // namespace

TEST_CASE("neox corpus: NeoX's own model configs are accepted or refused by feature name",
          "[neox]") {
  const fs::path dir = ds::test::makeScratchDir("neox-corpus");
  const ds::test::SmallBpe bpe = ds::test::writeSmallBpe(dir.string());
  const std::vector<std::string> models = modelConfigs();
  CHECK(models.size() >= 40);
  size_t accepted = 0;
  for (size_t m = 0; m < models.size(); ++m) {
    const std::string& model = models[m];
    INFO(model);
    {
      Json merged = readNeoxYaml(filesFor(model));
      pointPathsAt(merged, dir, bpe);
      const auto refused = kRefused.find(model);
      // As a user runs it, on this machine's memory: ds-config check itself, on the files merged
      // (JSON of NeoX keys) with their paths pointed here. A config this machine cannot hold is a
      // warning, not a refusal (--node-memory compares with the job's nodes).
      const fs::path file = dir / (std::to_string(m) + "-" +
                                   fs::path(model).filename().replace_extension(".json").string());
      std::ofstream(file) << merged.dump(2);
      const ds::test::CommandOutcome check =
          ds::test::runCommand(std::string(DS_BIN_DIR) + "/ds-config check " + file.string());
      INFO(check.output);
      if (refused == kRefused.end()) {
        CHECK(check.status == 0);
        accepted += check.status == 0;
      } else {
        CHECK(check.status == 2);
        // The refusal names the file, then the key and the feature.
        CHECK_THAT(check.output,
                   Catch::Contains("ds-config: error: " + file.string() + ": " + refused->second));
      }
    }
  }
  // The README's count is the one a user sees.
  std::ifstream readme(fs::path(DS_SOURCE_DIR) / "README.md");
  std::string text;  // its words, one space apart: the sentence may wrap anywhere
  for (std::string word; readme >> word;) text += word + " ";
  CHECK_THAT(text, Catch::Contains("Of the " + std::to_string(models.size()) +
                                   " model configs in NeoX's `configs/`, " +
                                   std::to_string(models.size() - kRefused.size()) +
                                   " are accepted by `ds-config check`"));
  CHECK(accepted == models.size() - kRefused.size());
  fs::remove_all(dir);
}
