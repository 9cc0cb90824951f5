// "Did you mean ...?" suggestions for unknown config keys: the nearest known key by edit
// distance. Only a hint for messages; it never changes what is accepted.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ds::runtime {

// Returns the candidate with the smallest case-insensitive edit distance (Levenshtein) to `key`,
// or "" when none is within max(2, key.size() / 3). Ties go to the earlier candidate.
std::string closestKey(std::string_view key, const std::vector<std::string_view>& candidates);

}  // namespace ds::runtime
