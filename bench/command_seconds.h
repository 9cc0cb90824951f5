// Runs a baseline command (a python3 -c script timing PyTorch) and reads the one number it prints:
// seconds per operation, or -1 when the command fails or prints nothing (torch missing).
#pragma once

#include <cstdio>
#include <string>

namespace ds::bench {

inline double commandSeconds(const std::string& command) {
  FILE* pipe = popen((command + " 2>/dev/null").c_str(), "r");
  if (pipe == nullptr) return -1;
  double seconds = -1;
  if (std::fscanf(pipe, "%lf", &seconds) != 1) seconds = -1;
  pclose(pipe);
  return seconds;
}

}  // namespace ds::bench
