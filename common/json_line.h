// One JSON object per line (the benches' and ds-comm-bench's --json output), keys in the order
// they were added, numbers rounded to the precision the figure deserves (a timing's noise is in
// its third digit).
#pragma once

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

namespace ds {

using JsonLine = nlohmann::ordered_json;

inline double rounded(double value, int decimals) {
  const double scale = std::pow(10.0, decimals);
  return std::round(value * scale) / scale;
}

inline void printJsonLine(const JsonLine& line) {
  std::printf("%s\n", line.dump().c_str());
  std::fflush(stdout);
}

}  // namespace ds
