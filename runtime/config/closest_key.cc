// Edit-distance suggestion for unknown keys. Two-row Levenshtein: keys are short, so the
// O(n*m) cost is irrelevant and no cleverer algorithm is worth its code.
#include "runtime/config/closest_key.h"

#include <algorithm>
#include <cstddef>

namespace ds::runtime {
namespace {

char lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

size_t editDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1);
  std::vector<size_t> cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t substitute = prev[j - 1] + (lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, substitute});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

}  // namespace

std::string closestKey(std::string_view key, const std::vector<std::string_view>& candidates) {
  const size_t threshold = std::max<size_t>(2, key.size() / 3);
  std::string_view best;
  size_t bestDistance = threshold + 1;
  for (std::string_view candidate : candidates) {
    const size_t d = editDistance(key, candidate);
    if (d < bestDistance) {
      bestDistance = d;
      best = candidate;
    }
  }
  return std::string(best);
}

}  // namespace ds::runtime
