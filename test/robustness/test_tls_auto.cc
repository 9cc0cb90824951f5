// --tls-auto: a job runs over mutual TLS with a certificate made for it; the key never shows in a
// worker's environment or on a command line, and the private directory is gone once the PEMs are
// loaded, so not even SIGKILL of ds-launch leaves a key on disk.
#include <signal.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>

#include "test/launch_harness.h"
#include "test/skip.h"

using namespace ds::test;
using namespace std::chrono_literals;

TEST_CASE("robustness: --tls-auto runs a job over mutual TLS and leaves no key behind") {
  if (skipUnless(std::system("command -v openssl >/dev/null 2>&1") == 0,
                 "openssl is not installed"))
    return;
  const std::string dir = makeScratchDir("tlsauto");
  writeFile(dir + "/hostfile", "127.0.0.1 slots=2\n");
  const char* previous = std::getenv("TMPDIR");
  const std::string oldTmp = previous != nullptr ? previous : "";
  setenv("TMPDIR", dir.c_str(), 1);  // where the job's private certificate directory goes
  auto job =
      startLaunch(dir, {"-H", "hostfile", "--master_port", "0", "--log_dir", "logs", "--tls-auto",
                        "--no_python", "--no_local_rank", "--", "/bin/sh", "-c",
                        "tr '\\0' '\\n' < /proc/$PPID/environ | grep -c PRIVATE; "
                        "env | grep -c DS_TLS_; true"});
  if (oldTmp.empty())
    unsetenv("TMPDIR");
  else
    setenv("TMPDIR", oldTmp.c_str(), 1);
  const auto status = waitExit(job, 60s);
  INFO(readFile(dir + "/stdout") << readFile(dir + "/stderr"));
  REQUIRE(status == 0);
  CHECK(readFile(dir + "/stdout").find("(mutual TLS)") != std::string::npos);
  // The worker (the program's parent) holds no key in its environment, nor does the program.
  const std::string log = readFile(dir + "/logs/rank-0.log");
  CHECK(log == "0\n0\n");
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    CHECK(entry.path().filename().string().find("ds-launch-tls-") == std::string::npos);
}

TEST_CASE(
    "robustness: --tls-auto's key directory is gone while the job runs, so SIGKILL leaves "
    "none") {
  if (skipUnless(std::system("command -v openssl >/dev/null 2>&1") == 0,
                 "openssl is not installed"))
    return;
  const std::string dir = makeScratchDir("tlsauto-kill");
  writeFile(dir + "/hostfile", "127.0.0.1 slots=1\n");
  const char* previous = std::getenv("TMPDIR");
  const std::string oldTmp = previous != nullptr ? previous : "";
  setenv("TMPDIR", dir.c_str(), 1);
  auto job = startLaunch(dir, {"-H", "hostfile", "--master_port", "0", "--log_dir", "logs",
                               "--tls-auto", "--no_python", "--no_local_rank", "--", "/bin/sh",
                               "-c", "touch " + dir + "/running; sleep 60"});
  if (oldTmp.empty())
    unsetenv("TMPDIR");
  else
    setenv("TMPDIR", oldTmp.c_str(), 1);
  REQUIRE(waitUntil(30s, [&] { return std::filesystem::exists(dir + "/running"); }));
  auto keyDirectories = [&] {
    int found = 0;
    for (const auto& entry : std::filesystem::directory_iterator(dir))
      if (entry.path().filename().string().find("ds-launch-tls-") != std::string::npos) ++found;
    return found;
  };
  CHECK(keyDirectories() == 0);  // every rank runs: the PEMs live in memory only
  REQUIRE(::kill(job.pid, SIGKILL) == 0);
  waitExit(job, 5s);
  CHECK(keyDirectories() == 0);
  // The workers stop on their parent's death (test_orphans checks how); wait for them here.
  CHECK(waitUntil(10s, [&] { return processesMentioning(dir + "/running").empty(); }));
}
