// What each GPT-NeoX config key does here, in one table (the NeoX counterpart of the DeepSpeed
// config policy table): honoured (implemented, or translated into the DeepSpeed config), without
// effect here by its nature (accepted with a note), an observer this build does not provide (a
// warning when switched on), or a feature that is not implemented (refused only when switched
// on, naming the feature and the value that switches it off). parseNeoxConfig dispatches on it,
// and `ds-config neox-keys` prints it for docs/neox-arguments.md.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/config/config_policy.h"

namespace ds::runtime {

struct NeoxKeyRule {
  std::string_view name;  // hyphenated, as NeoX documents it with '_' -> '-'
  KeyEffect effect;
  // Honoured: what it sets; NoEffect: why it changes nothing here; Observer / NotImplemented: the
  // feature it switches on.
  std::string_view note;
  // Values that leave the feature off, as JSON texts separated by '|' ("false", "0|1"); null is
  // always off. Only read for Observer and NotImplemented keys.
  std::string_view offValues = "false";
};

// Every rule, in NeoX's documentation order followed by older NeoX names.
const std::vector<NeoxKeyRule>& neoxKeyTable();

// DeepSpeed keys that a NeoX config's GPT trainer reads itself, before DeepSpeed's config policy
// sees the DeepSpeed keys (which refuses them for a DeepSpeed JSON job), and what they do here.
struct NeoxDeepSpeedKey {
  std::string_view name, note;
};
const std::vector<NeoxDeepSpeedKey>& neoxDeepSpeedKeys();

// The rule for a hyphenated key, or nullptr.
const NeoxKeyRule* findNeoxKey(std::string_view hyphenated);

// Whether `value` leaves an Observer / NotImplemented key's feature off.
bool neoxKeyIsOff(const NeoxKeyRule& rule, const nlohmann::json& value);

// The refusal for a NotImplemented key switched on: names the key, the feature, the value given
// and how to switch it off.
std::string neoxKeyRefusal(const NeoxKeyRule& rule, const nlohmann::json& value);

}  // namespace ds::runtime
