// Text without its leading and trailing spaces and tabs: config lists ("a.yml, b.yml") and
// DeepSpeed's stripped keys ("gradient_accumulation_steps " in arg_mappings).
#pragma once

#include <string>

namespace ds {

inline std::string trimmed(const std::string& s) {
  const size_t first = s.find_first_not_of(" \t");
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(" \t") - first + 1);
}

}  // namespace ds
