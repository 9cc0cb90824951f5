// Resource selection: DeepSpeed runner.py's parse_node_config_list, parse_resource_filter and the
// selection steps of main(), in that order, so errors surface in the same order as DeepSpeed's.
#include "launcher/resources.h"

#include <algorithm>
#include <sstream>

#include "common/error.h"

namespace ds::launcher {
namespace {

// Python int() on a slot token: surrounding whitespace and a sign allowed, digits required.
std::optional<int> parseSlot(std::string token) {
  const auto first = token.find_first_not_of(" \t\r\n\f\v");
  if (first == std::string::npos) return std::nullopt;
  token = token.substr(first, token.find_last_not_of(" \t\r\n\f\v") - first + 1);
  const bool negative = token[0] == '-';
  size_t i = (token[0] == '+' || negative) ? 1 : 0;
  if (i == token.size()) return std::nullopt;
  for (size_t j = i; j < token.size(); ++j)
    if (token[j] < '0' || token[j] > '9') return std::nullopt;
  // Leading zeros are fine ("0000000001" is 1); only the significant digits must fit an int.
  while (i + 1 < token.size() && token[i] == '0') ++i;
  if (token.size() - i > 9) return std::nullopt;
  const int value = std::stoi(token.substr(i));
  return negative ? -value : value;
}

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> pieces;
  size_t start = 0;
  for (size_t at; (at = text.find(separator, start)) != std::string::npos; start = at + 1)
    pieces.push_back(text.substr(start, at - start));
  pieces.push_back(text.substr(start));
  return pieces;
}

NodeResources* find(Resources& resources, const std::string& host) {
  for (auto& node : resources)
    if (node.host == host) return &node;
  return nullptr;
}
const NodeResources* find(const Resources& resources, const std::string& host) {
  return find(const_cast<Resources&>(resources), host);
}

void removeDuplicatesKeepingOrder(std::vector<int>& slots) {
  std::vector<int> kept;
  for (int slot : slots)
    if (std::find(kept.begin(), kept.end(), slot) == kept.end()) kept.push_back(slot);
  slots = std::move(kept);
}

std::string knownHosts(const Resources& pool) {
  std::string names;
  for (const auto& node : pool) names += (names.empty() ? "" : ", ") + node.host;
  return names;
}

}  // namespace

Resources poolFromHostfile(const std::vector<HostEntry>& hosts) {
  Resources pool;
  for (const auto& entry : hosts) {
    NodeResources node{entry.host, {}};
    for (int slot = 0; slot < entry.slots; ++slot) node.slots.push_back(slot);
    pool.push_back(std::move(node));
  }
  return pool;
}

Resources parseNodeSpecList(const std::string& spec, const std::string& flag) {
  Resources parsed;
  for (const std::string& piece : split(spec, '@')) {
    const std::vector<std::string> parts = split(piece, ':');
    if (parts.size() > 2)
      throw Error(flag + " '" + spec + "': '" + piece +
                  "' has more than one ':'; a node is HOST or HOST:SLOT,SLOT,...");
    std::vector<int> slots;
    if (parts.size() == 2)
      for (const std::string& token : split(parts[1], ',')) {
        const auto slot = parseSlot(token);
        if (!slot)
          throw Error(flag + " '" + spec + "': slot '" + token + "' in '" + piece +
                      "' is not a slot number (an integer of at most 9 digits; write HOST:0,1)");
        slots.push_back(*slot);
      }
    if (NodeResources* existing = find(parsed, parts[0])) {
      existing->slots.insert(existing->slots.end(), slots.begin(), slots.end());
    } else {
      parsed.push_back({parts[0], slots});
    }
  }
  for (auto& node : parsed) {
    std::sort(node.slots.begin(), node.slots.end());
    node.slots.erase(std::unique(node.slots.begin(), node.slots.end()), node.slots.end());
  }
  return parsed;
}

Resources filterResources(const Resources& pool, const std::string& include,
                          const std::string& exclude) {
  if (!include.empty() && !exclude.empty())
    throw Error("--include and --exclude are mutually exclusive: use one of them");
  if (include.empty() && exclude.empty()) return pool;
  const bool including = !include.empty();
  const std::string flag = including ? "--include" : "--exclude";
  const Resources spec = parseNodeSpecList(including ? include : exclude, flag);

  Resources filtered = including ? Resources{} : pool;
  for (const auto& [host, slots] : spec) {
    const NodeResources* available = find(pool, host);
    if (available == nullptr)
      throw Error(flag + ": Hostname '" + host +
                  "' not found in hostfile (hosts: " + knownHosts(pool) + ")");
    for (int slot : slots)
      if (std::find(available->slots.begin(), available->slots.end(), slot) ==
          available->slots.end())
        throw Error(flag + ": No slot '" + std::to_string(slot) + "' specified on host '" + host +
                    "' (it has " + std::to_string(available->slots.size()) + " slots)");
    NodeResources* target = find(filtered, host);
    if (including) {
      filtered.push_back({host, slots.empty() ? available->slots : slots});
    } else if (slots.empty()) {
      target->slots.clear();
    } else {
      for (int slot : slots)
        target->slots.erase(std::remove(target->slots.begin(), target->slots.end(), slot),
                            target->slots.end());
    }
  }

  Resources ordered;  // hostfile order, empty hosts dropped
  for (const auto& node : pool)
    if (const NodeResources* selected = find(filtered, node.host)) {
      NodeResources copy = *selected;
      removeDuplicatesKeepingOrder(copy.slots);
      if (!copy.slots.empty()) ordered.push_back(std::move(copy));
    }
  return ordered;
}

Selection selectResources(const Resources& pool, const SelectionRequest& request) {
  Selection selection;
  std::string include = request.include;
  const bool filtering = !request.include.empty() || !request.exclude.empty();
  if (!request.hostfileFound && !request.visibleDevices.empty()) {
    selection.clearVisibleDevices = true;
    if (filtering || request.numNodes > 1 || request.numGpus > 0) {
      selection.notices.push_back(
          "Detected VISIBLE_DEVICES=" + request.visibleDevices +
          " but ignoring it because one or several of --include/--exclude/--num_gpus/--num_nodes "
          "cl args were used. If you want to use CUDA_VISIBLE_DEVICES don't pass any of these "
          "arguments to ds-launch.");
    } else {
      include = "localhost:" + request.visibleDevices;
      selection.notices.push_back("Detected VISIBLE_DEVICES=" + request.visibleDevices +
                                  ": setting --include=" + include);
    }
  }
  const bool filteringNow = !include.empty() || !request.exclude.empty();
  if ((request.numNodes >= 0 || request.numGpus >= 0) && filteringNow)
    throw Error(
        "Cannot specify num_nodes/gpus with include/exclude: select resources either with "
        "--include/--exclude or with --num_nodes/--num_gpus");
  if (!request.hostfileFound && request.numNodes > 1)
    throw Error("--num_nodes " + std::to_string(request.numNodes) +
                ": Num nodes is >1 but no extra nodes available via hostfile (give one with -H)");

  Resources active = filterResources(pool, include, request.exclude);
  if (active.empty())
    throw Error("no resources left after " +
                std::string(include.empty() ? "--exclude '" + request.exclude + "'"
                                            : "--include '" + include + "'") +
                ": nothing to run on");

  if (request.numNodes > 0 && request.numNodes < static_cast<int>(active.size()))
    active.resize(request.numNodes);
  if (request.numGpus > 0)
    for (auto& node : active) {
      if (request.numGpus > static_cast<int>(node.slots.size()))
        throw Error("--num_gpus " + std::to_string(request.numGpus) + ": host '" + node.host +
                    "' has only " + std::to_string(node.slots.size()) +
                    " slots in the hostfile; lower --num_gpus or raise its slots=");
      node.slots.clear();
      for (int slot = 0; slot < request.numGpus; ++slot) node.slots.push_back(slot);
    }

  for (auto& node : active)
    if (!node.slots.empty()) selection.resources.push_back(std::move(node));
  if (selection.resources.empty())
    throw Error(
        "no slots selected: every selected host has slots=0; give hosts slots=N with N > 0");
  return selection;
}

std::string describe(const Resources& resources) {
  std::ostringstream out;
  for (size_t n = 0; n < resources.size(); ++n) {
    out << (n ? "@" : "") << resources[n].host << ':';
    for (size_t i = 0; i < resources[n].slots.size(); ++i)
      out << (i ? "," : "") << resources[n].slots[i];
  }
  return out.str();
}

}  // namespace ds::launcher
