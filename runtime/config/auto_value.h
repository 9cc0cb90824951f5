// "auto": the value DeepSpeed's autotuner and Hugging Face's Trainer write where they choose.
// ds-launch --autotuning replaces it in the keys it tunes; every config reader refuses it elsewhere
// with autoValueMessage. Kept apart from the JSON reader so the NeoX reader can include it.
#pragma once

#include <string>

namespace ds::runtime {

// The config keys whose "auto" the autotuner replaces with what it chooses
// (launcher/autotuning/tuning_space.h), in DeepSpeed's and NeoX's spelling.
bool isTunedKey(const std::string& path);
// What to say where a config holds "auto" at `path` but no autotuner fills it in.
std::string autoValueMessage(const std::string& path);

template <typename JsonValue>  // either nlohmann type (the NeoX reader's is unordered)
bool isAutoValue(const JsonValue& v) {
  return v.is_string() && v.template get<std::string>() == "auto";
}

}  // namespace ds::runtime
