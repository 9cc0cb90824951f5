// What each DeepSpeed config key does here, in one table: honoured (and where), without effect
// here by its nature, an observer this build does not provide (a warning when switched on), or a
// feature that is not implemented (an error when switched on, naming the key and how to switch it
// off). Keys of unimplemented features are still type-checked. `ds-config check` prints the table's
// verdict for every key a config sets.
#pragma once

#include <string>
#include <vector>

namespace ds::runtime {

enum class KeyEffect { Honoured, NoEffect, Observer, NotImplemented };

const char* keyEffectName(KeyEffect effect);  // "honoured", "no effect", ...

// The verdict for one key a config sets.
struct KeyVerdict {
  std::string path;  // "tensorboard", "zero_optimization.stage"
  KeyEffect effect;
  bool active;       // set to do something (only meaningful for Observer / NotImplemented)
  std::string note;  // where it is honoured, or why it has no effect, or how to switch it off
};

// Every rule of the table, for documentation: path, effect, note.
std::vector<KeyVerdict> configPolicyTable();

}  // namespace ds::runtime
