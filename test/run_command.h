// Runs a shell command the way a user would and keeps what it printed (stdout and stderr
// together) and its status as a shell reports it: 128 + signal for a signal death.
#pragma once

#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdio>
#include <string>

namespace ds::test {

struct CommandOutcome {
  int status;
  std::string output;
};

// `keepBytes`: at most this much of the output is kept (the rest is read and dropped), for
// commands fed hostile input that might print without end.
inline CommandOutcome runCommand(const std::string& command, size_t keepBytes = SIZE_MAX) {
  std::string output;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof(buffer), pipe)) > 0;)
    if (output.size() < keepBytes) output.append(buffer, n);
  const int raw = pclose(pipe);
  return {WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw), output};
}

}  // namespace ds::test
