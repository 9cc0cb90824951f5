// Expands and checks NeoX's attention-config (see neox_attention_config.h).
#include "runtime/config/neox_attention_config.h"

#include <algorithm>

#include "common/error.h"

namespace ds::runtime {
namespace {

// NeoX's ATTENTION_TYPE_CHOICES (megatron/neox_arguments/neox_args.py).
const std::vector<std::string> kNeoxKinds = {
    "global", "local", "sparse_fixed", "sparse_variable", "bigbird", "bslongformer", "gmlp", "amlp",
    "flash",  "rwkv",  "mamba"};

[[noreturn]] void malformed(const nlohmann::json& value) {
  throw Error(
      "attention-config: expected NeoX's list of [[kinds], layers] pairs, e.g. "
      "[[[\"flash\"], 24]] or [[[\"global\"], \"all\"]], or one kind per layer; got " +
      value.dump());
}

std::vector<std::string> kindList(const nlohmann::json& kinds, const nlohmann::json& whole) {
  if (!kinds.is_array() || kinds.empty()) malformed(whole);
  std::vector<std::string> out;
  for (const auto& k : kinds) {
    if (!k.is_string()) malformed(whole);
    out.push_back(k.get<std::string>());
  }
  return out;
}

// "0-3, 7" from the layers whose kind is `kind`.
std::string layersWith(const std::vector<std::string>& kinds, const std::string& kind) {
  std::string text;
  for (size_t i = 0; i < kinds.size();) {
    if (kinds[i] != kind) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j + 1 < kinds.size() && kinds[j + 1] == kind) ++j;
    text += (text.empty() ? "" : ", ") + std::to_string(i) +
            (j > i ? "-" + std::to_string(j) : std::string());
    i = j + 1;
  }
  return text;
}

}  // namespace

std::vector<std::string> expandAttentionConfig(const nlohmann::json& value, int numLayers) {
  const auto layers = static_cast<size_t>(numLayers);
  if (value.is_null()) return std::vector<std::string>(layers, "global");  // NeoX's default
  if (!value.is_array()) malformed(value);
  std::vector<std::string> kinds;
  // A list of strings only is taken as already expanded, as NeoX's expand_attention_types does.
  if (std::all_of(value.begin(), value.end(), [](const auto& v) { return v.is_string(); })) {
    kinds = kindList(value, value);
  } else {
    for (const auto& item : value) {
      if (!item.is_array() || item.size() != 2) malformed(value);
      const std::vector<std::string> pattern = kindList(item[0], value);
      if (item[1].is_string() && item[1].get<std::string>() == "all") {
        // NeoX: the pattern repeated over all layers, and the rest of the list ignored.
        if (layers % pattern.size() != 0)
          throw Error("attention-config: num-layers " + std::to_string(layers) +
                      " is not divisible by the length of the pattern " + item[0].dump() +
                      " given for \"all\" layers (NeoX's rule)");
        kinds.clear();
        for (size_t i = 0; i < layers / pattern.size(); ++i)
          kinds.insert(kinds.end(), pattern.begin(), pattern.end());
        break;
      }
      if (!item[1].is_number_integer() || item[1].get<int64_t>() < 0 ||
          item[1].get<int64_t>() > (int64_t{1} << 20))
        malformed(value);
      for (int64_t i = 0; i < item[1].get<int64_t>(); ++i)
        kinds.insert(kinds.end(), pattern.begin(), pattern.end());
    }
  }
  if (kinds.size() != layers)
    throw Error("attention-config: names " + std::to_string(kinds.size()) +
                " layers but num-layers is " + std::to_string(layers) +
                "; NeoX requires one attention kind per layer (e.g. [[[\"flash\"], " +
                std::to_string(layers) + "]])");
  for (const std::string& k : kinds)
    if (std::find(kNeoxKinds.begin(), kNeoxKinds.end(), k) == kNeoxKinds.end())
      throw Error("attention-config: attention kind \"" + k +
                  "\" is not one NeoX knows (global, local, sparse_fixed, sparse_variable, "
                  "bigbird, bslongformer, gmlp, amlp, flash, rwkv, mamba)");
  for (const std::string& k : kinds)
    if (k != "global" && k != "flash")
      throw Error("attention-config: \"" + k + "\" (layers " + layersWith(kinds, k) +
                  ") is not implemented by this trainer; only dense causal attention is: use "
                  "\"global\" or \"flash\" for every layer");
  return kinds;
}

void checkSlidingWindow(const std::vector<std::string>& kinds, int slidingWindowWidth) {
  if (slidingWindowWidth < 0) return;
  const std::string global = layersWith(kinds, "global");
  if (!global.empty())
    throw Error(
        "sliding-window-width: NeoX applies the window only in flash attention (\"Only "
        "supported with Flash Attention 2\") and ignores it on global layers (here " +
        global + "); set attention-config to [[[\"flash\"], " + std::to_string(kinds.size()) +
        "]] or sliding-window-width: null");
}

}  // namespace ds::runtime
