#include "tools/ds_config/unit_number.h"

#include <cmath>
#include <exception>

namespace ds::tools {

std::optional<double> parseUnitNumber(const std::string& text,
                                      const std::vector<std::pair<std::string, double>>& units) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  const std::string suffix = text.substr(used);
  for (const auto& [unit, scale] : units)
    if (suffix == unit && std::isfinite(value * scale)) return value * scale;
  return std::nullopt;
}

}  // namespace ds::tools
