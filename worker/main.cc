// ds-worker: one per rank. Joins the coordinator, keeps its command stream and heartbeats going,
// runs the job, reports, exits. Exit status: 0 done, 1 job failed, 2 bad usage, 3 join refused,
// 10 aborted by the coordinator, 11 coordinator gone.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <thread>

#include "runtime/common/error.h"
#include "worker/coordinator_client.h"
#include "worker/coordinator_store.h"
#include "worker/progress_board.h"
#include "worker/train_job.h"

namespace {

using namespace ds::worker;

constexpr int kJobFailed = 1;
constexpr int kUsage = 2;
constexpr int kJoinRefused = 3;
constexpr int kAborted = 10;
constexpr int kCoordinatorGone = 11;

// Read by the heartbeat thread at send time, so the training loop never touches /proc.
int64_t residentBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * 4096;
}

// Leaves at once, from any thread: the job may be blocked inside a collective that will never
// complete, so there is nothing to unwind cleanly.
[[noreturn]] void leaveNow(int status, const std::string& why) {
  std::fflush(stdout);
  std::fprintf(stderr, "ds-worker: %s\n", why.c_str());
  std::fflush(stderr);
  _exit(status);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ds-worker: one rank of a ds-launch job (started by ds-launch)"};
  std::string coordinatorAddress, host;
  int slot = 0;
  int joinTimeoutSeconds = 60;
  app.add_option("--coordinator", coordinatorAddress, "coordinator host:port")->required();
  app.add_option("--host", host, "this node's name in the launch plan; Gloo binds to it")
      ->required();
  app.add_option("--slot", slot, "slot index on this host")->required();
  app.add_option("--join_timeout", joinTimeoutSeconds, "seconds to wait for the coordinator");
  CLI11_PARSE(app, argc, argv);
  const char* token = std::getenv("DS_JOB_TOKEN");
  if (token == nullptr || *token == '\0')
    leaveNow(kUsage, "DS_JOB_TOKEN is not set (ds-launch sets it)");
  // Not needed any more, and children must not inherit it by accident.
  std::string jobToken = token;
  unsetenv("DS_JOB_TOKEN");

  CoordinatorClient client(coordinatorAddress, jobToken);
  JoinResult join;
  try {
    join = client.join(host, slot, std::chrono::seconds(joinTimeoutSeconds));
  } catch (const ds::Error& e) {
    leaveNow(kJoinRefused, std::string("join refused: ") + e.what());
  }

  std::atomic<bool> stopRequested{false};
  std::atomic<bool> reported{false};
  std::thread watcher([&] {
    client.watch([&](CommandKind kind, const std::string& reason) {
      if (kind == CommandKind::Stop) stopRequested = true;
      if (kind == CommandKind::Abort)
        leaveNow(kAborted, "rank " + std::to_string(join.rank) + " aborted: " + reason);
      if (kind == CommandKind::CoordinatorGone && !reported)
        leaveNow(kCoordinatorGone, "rank " + std::to_string(join.rank) + ": coordinator gone (" +
                                       reason + "), exiting");
    });
  });
  watcher.detach();

  ProgressBoard board;
  std::mutex heartbeatMutex;
  std::condition_variable heartbeatWake;
  bool heartbeatStop = false;
  std::thread heartbeat([&] {
    std::unique_lock lock(heartbeatMutex);
    while (!heartbeatStop) {
      lock.unlock();
      Progress progress = board.snapshot();
      progress.residentBytes = residentBytes();
      client.heartbeat(progress);
      lock.lock();
      heartbeatWake.wait_for(lock, join.heartbeatInterval, [&] { return heartbeatStop; });
    }
  });

  FinalReport report;
  int status = 0;
  try {
    const TrainOptions options = parseTrainOptions(join.jobArgs);
    CoordinatorStore store(client);
    const TrainResult result = runTrainJob(options, join, store, host, board, stopRequested);
    report.steps = result.steps;
    report.lastLoss = result.lastLoss;
    report.wallSeconds = result.wallSeconds;
    report.metrics["samples_per_second"] = result.samplesPerSecond;
    board.setState(WorkerState::Finished);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "ds-worker: rank %d failed: %s\n", join.rank, e.what());
    report.exitStatus = status = kJobFailed;
    report.error = e.what();
    board.setState(WorkerState::Failed);
  }
  {
    std::lock_guard lock(heartbeatMutex);
    heartbeatStop = true;
  }
  heartbeatWake.notify_all();
  heartbeat.join();
  try {
    reported = true;
    client.report(report);
  } catch (const ds::Error& e) {
    std::fprintf(stderr, "ds-worker: rank %d could not report: %s\n", join.rank, e.what());
  }
  std::fflush(stdout);
  std::fflush(stderr);
  _exit(status);  // the watcher thread is parked in a stream read; nothing else to unwind
}
