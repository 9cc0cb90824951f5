// Checked numbers from bench command lines: a value that is not a whole number in range is an
// error naming the flag (the benches' main() turns it into a message and exit 2).
#pragma once

#include <sstream>
#include <string>
#include <vector>

#include "common/error.h"

namespace ds::bench {

inline long flagNumber(const std::string& flag, const std::string& text, long min, long max) {
  size_t used = 0;
  long value = 0;
  try {
    value = std::stol(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || value < min || value > max)
    throw Error(flag + ": expected a whole number in " + std::to_string(min) + ".." +
                std::to_string(max) + ", got \"" + text + "\"");
  return value;
}

// "1,2,4" -> {1, 2, 4}, each checked as above.
inline std::vector<int> flagList(const std::string& flag, const std::string& text, int min,
                                 int max) {
  std::vector<int> values;
  std::stringstream list(text);
  for (std::string item; std::getline(list, item, ',');)
    values.push_back(static_cast<int>(flagNumber(flag, item, min, max)));
  if (values.empty()) throw Error(flag + ": expected a comma-separated list of numbers");
  return values;
}

}  // namespace ds::bench
