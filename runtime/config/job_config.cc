#include "runtime/config/job_config.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/error.h"
#include "common/json_text.h"
#include "common/printable.h"
#include "common/trimmed.h"

namespace ds::runtime {
namespace {

enum class FileKind { DeepSpeed, Neox };

// Up to three keys, quoted, for a message: enough to see why, short enough to read.
std::string someKeys(const std::vector<std::string>& keys) {
  std::string out;
  for (size_t i = 0; i < keys.size() && i < 3; ++i)
    out += (i ? ", " : "") + std::string("\"") + printable(keys[i]) + "\"";
  if (keys.size() > 3) out += " and " + std::to_string(keys.size() - 3) + " more";
  return out;
}

// A file that is not .yml/.yaml, by its top-level keys. NeoX configs carry DeepSpeed keys beside
// their own, so NeoX keys decide unless DeepSpeed's outnumber them (then a DeepSpeed file with a
// stray NeoX key, or the other way round: the file says which). Text that is not a JSON object
// stays DeepSpeed, whose parser says what is wrong with it as before.
FileKind kindByKeys(const std::string& path, const std::string& text) {
  nlohmann::json doc;
  try {
    doc = parseJsonText(text, path, {kMaxShippedConfigDepth});
  } catch (const Error&) {
    return FileKind::DeepSpeed;
  }
  if (!doc.is_object() || doc.empty()) return FileKind::DeepSpeed;
  std::vector<std::string> neox, deepspeed, unknown;
  for (const auto& [key, value] : doc.items()) {
    switch (configKeyOwner(key)) {
      case ConfigKeyOwner::Neox:
        neox.push_back(key);
        break;
      case ConfigKeyOwner::DeepSpeed:
        deepspeed.push_back(key);
        break;
      case ConfigKeyOwner::Unknown:
        unknown.push_back(key);
        break;
    }
  }
  if (neox.empty() && !deepspeed.empty()) return FileKind::DeepSpeed;
  if (!neox.empty() && neox.size() >= deepspeed.size()) return FileKind::Neox;
  if (neox.empty())
    throw Error(path + ": neither a NeoX nor a DeepSpeed config: no top-level key is one (" +
                someKeys(unknown) +
                "); NeoX keys are like \"num-layers\", DeepSpeed's like \"train_batch_size\"");
  throw Error(path + ": unclear whether a NeoX or a DeepSpeed config: DeepSpeed keys (" +
              someKeys(deepspeed) + ") beside fewer NeoX keys (" + someKeys(neox) +
              "); remove the NeoX keys for a DeepSpeed config, or give the NeoX model and "
              "training keys for a NeoX one");
}

}  // namespace

double builtInMlpParameters() {
  double count = 0;
  for (size_t l = 0; l + 1 < kBuiltInMlpLayers.size(); ++l)
    count += double(kBuiltInMlpLayers[l] + 1) * kBuiltInMlpLayers[l + 1];
  return count;
}

std::vector<std::string> splitConfigPaths(const std::vector<std::string>& given) {
  std::vector<std::string> out;
  for (const std::string& value : given) {
    std::stringstream in(value);
    for (std::string p; std::getline(in, p, ',');)
      if (std::string path = trimmed(p); !path.empty()) out.push_back(std::move(path));
  }
  return out;
}

std::string configPathsText(const std::vector<std::string>& given) {
  std::string out;
  for (const std::string& p : splitConfigPaths(given)) out += (out.empty() ? "" : ", ") + p;
  return out;
}

std::string readJobConfigText(const std::vector<std::string>& given) {
  const std::vector<std::string> list = splitConfigPaths(given);
  if (list.empty()) throw Error("no config file given");
  std::vector<FileKind> kinds;
  std::string deepspeedText;  // the last DeepSpeed file's, shipped when it is the only file
  for (const std::string& p : list) {
    if (isNeoxConfigPath(p)) {
      kinds.push_back(FileKind::Neox);
      continue;
    }
    deepspeedText = readDeepSpeedConfigText(p);
    kinds.push_back(kindByKeys(p, deepspeedText));
  }
  const bool anyNeox = std::find(kinds.begin(), kinds.end(), FileKind::Neox) != kinds.end();
  if (anyNeox) {
    for (size_t i = 0; i < list.size(); ++i)
      if (kinds[i] != FileKind::Neox)
        throw Error(list[i] +
                    ": a DeepSpeed config, given beside NeoX config files; a DeepSpeed JSON "
                    "goes into them as deepspeed_config: FILE");
    return nlohmann::json{{"neox", readNeoxYaml(list)}}.dump();
  }
  if (list.size() != 1) {
    throw Error(configPathsText(list) +
                ": give one DeepSpeed JSON config, or NeoX config files (a.yml b.yml)");
  }
  return deepspeedText;
}

bool isShippedNeoxText(const std::string& text) {
  // readJobConfigText's wrapping, dumped compactly, so it starts so.
  return text.rfind("{\"neox\":", 0) == 0;
}

JobConfig parseJobConfig(const std::string& text, int64_t worldSize, const std::string& where,
                         MemoryCheck memory) {
  JobConfig out;
  // Anything but readJobConfigText's wrapping of NeoX keys is a DeepSpeed JSON file as given,
  // parsed with its own bounds.
  if (isShippedNeoxText(text)) {
    const nlohmann::json doc = parseJsonText(text, where, {kMaxShippedConfigDepth});
    if (doc.is_object() && doc.size() == 1 && doc.contains("neox")) {
      // The keys' messages name the key; the file(s) they came from are named here, as a
      // DeepSpeed JSON file's are.
      NeoxConfig neox = [&] {
        try {
          return parseNeoxConfig(doc["neox"], worldSize, memory);
        } catch (const TimeoutError&) {
          throw;
        } catch (const Error& e) {
          throw Error(where + ": " + e.what());
        }
      }();
      out.deepspeed = std::move(neox.deepspeed);
      out.gpt = std::move(neox.train);
      out.notes = std::move(neox.notes);
      return out;
    }
  }
  out.deepspeed = parseDeepSpeedConfig(text, worldSize == kOneReplica ? 1 : worldSize, where);
  return out;
}

void checkBuiltInTrainer(const JobConfig& job) {
  if (!job.gpt && job.deepspeed.flopsProfiler.enabled)
    throw Error(
        "flops_profiler: profiles the GPT trainer (a NeoX YAML config); set "
        "\"enabled\": false for the MLP job");
}

void checkTrainingDevice(const JobConfig& job, DeviceKind device, const std::string& where) {
  if (device == DeviceKind::Cpu) return;
  if (!job.gpt)
    throw Error(where +
                ": the MLP trainer (a DeepSpeed JSON config) runs on the CPU only; the "
                "GPT trainer (a NeoX YAML config) runs on cuda");
  // What the engine's pipeline or the GPT's passes (GptConfig::hostOnlyOption) would refuse at
  // every rank, refused before any starts.
  const ParallelConfig& grid = job.gpt->parallel;
  const char* modelOption = job.gpt->model.hostOnlyOption(grid.model, grid.sequence);
  const std::string hostOnly = grid.pipe > 1 ? "pipe-parallel-size " + std::to_string(grid.pipe)
                               : modelOption ? modelOption
                                             : "";
  if (!hostOnly.empty())
    throw Error(where + ": " + hostOnly + " runs on the CPU only so far; use device cpu");
}

}  // namespace ds::runtime
