// A coordinator that freezes (SIGSTOP of ds-launch: its sockets stay open, nothing answers) is
// noticed by every worker: their heartbeats fail for the heartbeat timeout and they exit, saying
// why, instead of training on forever against a dead control plane.
#include <signal.h>

#include <catch2/catch.hpp>
#include <string>

#include "test/launch_harness.h"

using namespace ds::test;
using namespace std::chrono_literals;

TEST_CASE("robustness: workers leave a frozen coordinator within the heartbeat timeout") {
  const std::string dir = makeScratchDir("frozen");
  writeFile(dir + "/hostfile", "127.0.0.1 slots=2\n");
  writeFile(dir + "/config.json",
            R"({"train_micro_batch_size_per_gpu": 4, "optimizer": {"type": "Adam"}})");
  auto job = startLaunch(dir, {"-H", "hostfile", "--master_port", "0", "--log_dir", "logs",
                               "--heartbeat_interval", "0.2", "--heartbeat_timeout", "1", "train",
                               "--config", "config.json", "--steps", "100000000"});
  std::vector<WorkerInfo> workers;
  REQUIRE(waitUntil(60s, [&] {
    workers = findWorkers(job.pid);
    return workers.size() == 2 &&
           readFile(dir + "/stdout").find("[rank 0] step") != std::string::npos;
  }));
  REQUIRE(::kill(job.pid, SIGSTOP) == 0);
  const auto frozen = std::chrono::steady_clock::now();
  // Exited workers stay zombies of the stopped launcher: processExists ignores zombies.
  const bool left = waitUntil(15s, [&] {
    for (const auto& worker : workers)
      if (processExists(worker.pid)) return false;
    return true;
  });
  const auto took = std::chrono::steady_clock::now() - frozen;
  ::kill(job.pid, SIGKILL);
  ::kill(job.pid, SIGCONT);
  waitExit(job, 10s);
  REQUIRE(left);
  CHECK(took < 6s);  // 1 s timeout + one 1 s heartbeat deadline + slack for a loaded machine
}
