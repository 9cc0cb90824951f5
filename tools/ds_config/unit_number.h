// Numbers a user writes with a unit suffix on the command line ("1.3B" parameters, "512G" of
// memory), shared by ds-config's options: one parser, each option with its own units.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ds::tools {

// `text` as a number followed by one of `units` (suffix, scale; "" for a bare number): the
// number times the scale, or nullopt for anything else (no number, an unknown suffix, a result
// that is not finite).
std::optional<double> parseUnitNumber(const std::string& text,
                                      const std::vector<std::pair<std::string, double>>& units);

}  // namespace ds::tools
