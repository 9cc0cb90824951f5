// Malformed command lines through the real binaries: each ends with a message and a non-zero
// status, never a crash signal (std::terminate would show as 134).
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <string>

namespace {

struct Outcome {
  int status;  // as a shell reports it: 128 + signal for a signal death
  std::string output;
};

Outcome runCommand(const std::string& command) {
  std::string output;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof(buffer), pipe)) > 0;) output.append(buffer, n);
  const int raw = pclose(pipe);
  const int status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
  return {status, output};
}

}  // namespace

TEST_CASE("robustness: benches refuse malformed numbers without crashing") {
  const std::string bin = DS_BIN_DIR;
  for (const std::string& command :
       {bin + "/bench_launch --ranks abc", bin + "/bench_comm --ranks x",
        bin + "/bench_comm --bytes 99999999999999999999999", bin + "/bench_cpu_adam --params -"}) {
    INFO(command);
    const Outcome outcome = runCommand(command);
    INFO(outcome.output);
    CHECK(outcome.status != 0);
    CHECK(outcome.status < 128);
    CHECK(outcome.output.find("error") != std::string::npos);
  }
}
