// What a shell command prints on stdout, for baselines measured by another program (fio, PyTorch):
// nullopt when it cannot be started or exits with a failure.
#pragma once

#include <cstdio>
#include <optional>
#include <string>

namespace ds {

inline std::optional<std::string> commandOutput(const std::string& command) {
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return std::nullopt;
  std::string out;
  char buffer[4096];
  for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) out.append(buffer, n);
  if (pclose(pipe) != 0) return std::nullopt;
  return out;
}

}  // namespace ds
