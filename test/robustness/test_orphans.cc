// Nothing of a job survives it, not even the children a user's program started itself: with
// ds-launch SIGKILLed (its workers get SIGTERM as their parent-death signal and stop their
// program's whole process group), and when a failing rank tears the job down.
#include <signal.h>

#include <catch2/catch.hpp>
#include <string>

#include "test/launch_harness.h"

using namespace ds::test;
using namespace std::chrono_literals;

namespace {

// Starts a 2-rank job whose program leaves a background `sleep` (its own child) running and writes
// that child's pid to DIR/grandchild-RANK; returns once both files exist.
LaunchedJob startJobWithGrandchildren(const std::string& dir, const std::string& afterwards) {
  writeFile(dir + "/hostfile", "127.0.0.1 slots=2\n");
  auto job =
      startLaunch(dir, {"-H", "hostfile", "--master_port", "0", "--log_dir", "logs", "--no_python",
                        "--no_local_rank", "--", "/bin/sh", "-c",
                        "sleep 60 & echo $! > " + dir + "/grandchild-$RANK.tmp && mv " + dir +
                            "/grandchild-$RANK.tmp " + dir + "/grandchild-$RANK; " + afterwards});
  REQUIRE(waitUntil(30s, [&] {
    return !readFile(dir + "/grandchild-0").empty() && !readFile(dir + "/grandchild-1").empty();
  }));
  return job;
}

bool grandchildrenGone(const std::string& dir) {
  for (const char* rank : {"0", "1"})
    if (processExists(std::stoi(readFile(dir + "/grandchild-" + rank)))) return false;
  return true;
}

}  // namespace

TEST_CASE("robustness: SIGKILL of ds-launch leaves no grandchild of a program behind") {
  const std::string dir = makeScratchDir("orphans-kill");
  auto job = startJobWithGrandchildren(dir, "wait");
  REQUIRE(::kill(job.pid, SIGKILL) == 0);
  waitExit(job, 5s);
  const bool gone = waitUntil(5s, [&] { return grandchildrenGone(dir); });
  if (!gone)
    for (const char* rank : {"0", "1"})
      ::kill(std::stoi(readFile(dir + "/grandchild-" + rank)), SIGKILL);
  CHECK(gone);
}

TEST_CASE("robustness: a failing rank's teardown leaves no grandchild of a program behind") {
  const std::string dir = makeScratchDir("orphans-fail");
  // Rank 1 fails once both have started their child; rank 0 waits for its child.
  auto job = startJobWithGrandchildren(dir, "if [ $RANK = 1 ]; then sleep 1; exit 3; fi; wait");
  CHECK(waitExit(job, 30s) == 3);
  const bool gone = waitUntil(5s, [&] { return grandchildrenGone(dir); });
  if (!gone)
    for (const char* rank : {"0", "1"})
      ::kill(std::stoi(readFile(dir + "/grandchild-" + rank)), SIGKILL);
  CHECK(gone);
}
