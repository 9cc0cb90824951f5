// What the ranks of a launched job print in their logs, parsed: shared by the launch tests.
#pragma once

#include <map>
#include <regex>
#include <string>

namespace ds::test {

// "step N param_hash H" lines of one rank's log (the job ran with --print_param_hash), by step.
inline std::map<int, std::string> paramHashes(const std::string& log) {
  std::map<int, std::string> hashes;
  static const std::regex line(R"(step (\d+) param_hash ([0-9a-f]+))");
  for (std::sregex_iterator it(log.begin(), log.end(), line), end; it != end; ++it)
    hashes[std::stoi((*it)[1])] = (*it)[2];
  return hashes;
}

}  // namespace ds::test
