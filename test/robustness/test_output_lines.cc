// Robustness of rank output: a line of megabytes without a newline is neither buffered whole nor
// lost, and the unfinished last line of a program is written even when a child it left behind
// still holds the output pipe; a failed rank's tail reaches the terminal with its control bytes
// escaped.
#include <catch2/catch.hpp>
#include <sstream>
#include <string>

#include "test/launch_harness.h"

using namespace ds::test;
using namespace std::chrono_literals;

namespace {

// Runs `python3 -c code` as the one rank of a local job; returns the rank's log.
std::string runProgram(const std::string& name, const std::string& code) {
  const std::string dir = makeScratchDir(name);
  writeFile(dir + "/hostfile", "127.0.0.1 slots=1\n");
  auto job = startLaunch(dir, {"-H", "hostfile", "--master_port", "0", "--log_dir", "logs",
                               "--no_local_rank", "python3", "-c", code});
  REQUIRE(waitExit(job, 60s) == 0);
  return readFile(dir + "/logs/rank-0.log");
}

}  // namespace

TEST_CASE("robustness: a 3 MB line without a newline arrives whole, in bounded pieces") {
  const std::string log =
      runProgram("longline", "import sys; sys.stdout.write('x' * 3000000); sys.stdout.flush()");
  std::istringstream lines(log);
  size_t xs = 0, longest = 0, pieces = 0;
  for (std::string line; std::getline(lines, line);) {
    const size_t n = std::count(line.begin(), line.end(), 'x');
    if (n == 0) continue;
    xs += n;
    longest = std::max(longest, line.size());
    ++pieces;
  }
  CHECK(xs == 3000000);
  CHECK(longest <= 64 * 1024 + 16);
  CHECK(pieces >= 3000000 / (64 * 1024));
}

TEST_CASE("robustness: the last unfinished line is kept when a child still holds the pipe") {
  // The child sleeps with stdout open after the program exits, so the pipe never reaches EOF.
  const std::string log =
      runProgram("heldpipe",
                 "import os, subprocess, sys\n"
                 "subprocess.Popen(['sleep', '5'])\n"
                 "sys.stdout.write('no newline at the end'); sys.stdout.flush()\n");
  CHECK(log.find("no newline at the end") != std::string::npos);
}

TEST_CASE("robustness: a failed rank's message and log tail reach ds-launch's stderr escaped") {
  const std::string dir = makeScratchDir("escapes");
  writeFile(dir + "/hostfile", "127.0.0.1 slots=1\n");
  auto job = startLaunch(
      dir, {"-H", "hostfile", "--master_port", "0", "--log_dir", "logs", "--no_local_rank",
            "/bin/sh", "-c", "printf '\\033[2J\\033]0;owned\\007boom\\n'; exit 3"});
  REQUIRE(waitExit(job, 60s) == 3);
  const std::string err = readFile(dir + "/stderr");
  INFO(err);
  CHECK(err.find("\\x1b[2J\\x1b]0;owned\\x07boom") != std::string::npos);
  CHECK(err.find('\x1b') == std::string::npos);
  CHECK(err.find('\x07') == std::string::npos);
}
