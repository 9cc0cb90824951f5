// The "[rank N] " prefix every worker puts on its output lines: the one contract between
// ds-worker's output and ds-launch's routing of lines to ranks, whatever carried them.
#pragma once

#include <string>

namespace ds {

inline std::string rankTag(int rank) { return "[rank " + std::to_string(rank) + "] "; }

// The rank of a tagged line (and the text after the tag in `rest`), or -1 for an untagged line.
inline int parseRankTag(const std::string& line, std::string& rest) {
  if (!line.starts_with("[rank ")) return -1;
  size_t i = 6;
  int rank = 0;
  while (i < line.size() && i < 15 && line[i] >= '0' && line[i] <= '9')
    rank = rank * 10 + (line[i++] - '0');
  if (i == 6 || line.compare(i, 2, "] ") != 0) return -1;
  rest = line.substr(i + 2);
  return rank;
}

}  // namespace ds
