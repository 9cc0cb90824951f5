// Fuzz target: GPT-NeoX YAML configs as `ds-launch ... train --config A.yml B.yml` reads them:
// readNeoxYaml merges the files (a key set twice is refused), parseNeoxConfig turns the result
// into the job's configuration, for the model's shape (kOneReplica) and for an 8-rank job.
// Input: up to three YAML files separated by a line "#8<", then optionally a line "#json" and a
// DeepSpeed JSON file; the text "@DIR@" in the YAML becomes the directory that file is written
// to, so a config can name it (deepspeed_config: @DIR@/ds_config.json).
#include <string>
#include <vector>

#include "common/error.h"
#include "fuzz/fuzz_target.h"
#include "runtime/config/neox_config.h"

namespace ds::fuzz {
namespace {

std::string withDirectory(std::string_view text) {
  const std::string dir = scratchPath("");
  std::string out(text);
  for (size_t at = 0; (at = out.find("@DIR@/", at)) != std::string::npos; at += dir.size())
    out.replace(at, 6, dir);
  return out;
}

void fuzzNeoxYaml(std::string_view input) {
  const auto [yaml, json] = [&] {
    const auto parts = splitInput(input, "\n#json\n", 2);
    return std::pair{parts[0], parts.size() > 1 ? parts[1] : std::string_view()};
  }();
  writeScratchFile("ds_config.json", json);
  std::vector<std::string> paths;
  for (const std::string_view file : splitInput(yaml, "\n#8<\n", 3))
    paths.push_back(
        writeScratchFile("config" + std::to_string(paths.size()) + ".yml", withDirectory(file)));
  const nlohmann::json merged = runtime::readNeoxYaml(paths);
  for (const int64_t world : {runtime::kOneReplica, int64_t{8}}) {
    try {
      (void)runtime::parseNeoxConfig(merged, world, runtime::MemoryCheck::Elsewhere);
    } catch (const Error&) {
    }
  }
}

}  // namespace

DS_FUZZ_TARGET(neox_yaml, fuzzNeoxYaml);

}  // namespace ds::fuzz
