#include "runtime/config/job_config.h"

#include <nlohmann/json.hpp>
#include <sstream>

#include "common/error.h"
#include "common/json_text.h"

namespace ds::runtime {
namespace {

std::vector<std::string> splitPaths(const std::string& paths) {
  std::vector<std::string> out;
  std::stringstream in(paths);
  for (std::string p; std::getline(in, p, ',');)
    if (!p.empty()) out.push_back(p);
  return out;
}

}  // namespace

std::string readJobConfigText(const std::string& paths) {
  const std::vector<std::string> list = splitPaths(paths);
  if (!list.empty() && isNeoxConfigPath(list.front())) {
    for (const auto& p : list)
      if (!isNeoxConfigPath(p))
        throw Error(p +
                    ": NeoX configs are YAML (.yml/.yaml); a DeepSpeed JSON goes into them "
                    "as deepspeed_config: FILE");
    return nlohmann::json{{"neox", readNeoxYaml(list)}}.dump();
  }
  if (list.size() != 1)
    throw Error(paths + ": give one DeepSpeed JSON config, or NeoX YAML files (a,b.yml)");
  return readDeepSpeedConfigText(list.front());
}

JobConfig parseJobConfig(const std::string& text, int64_t worldSize, const std::string& where,
                         MemoryCheck memory) {
  JobConfig out;
  // readJobConfigText's wrapping of NeoX YAML (dumped compactly, so it starts so); anything else
  // is a DeepSpeed JSON file as given, parsed with its own bounds.
  if (text.rfind("{\"neox\":", 0) == 0) {
    const nlohmann::json doc = parseJsonText(text, where, {kMaxShippedConfigDepth});
    if (doc.is_object() && doc.size() == 1 && doc.contains("neox")) {
      NeoxConfig neox = parseNeoxConfig(doc["neox"], worldSize, memory);
      out.deepspeed = std::move(neox.deepspeed);
      out.gpt = std::move(neox.train);
      out.notes = std::move(neox.notes);
      return out;
    }
  }
  out.deepspeed = parseDeepSpeedConfig(text, worldSize, where);
  return out;
}

}  // namespace ds::runtime
