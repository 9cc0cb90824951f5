// Test harness for running ds-launch as a real process: start it with output captured to files,
// wait with a deadline, find its worker processes through /proc, read per-rank logs.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "test/scratch_dir.h"

namespace ds::test {

// Owns the ds-launch process: if a test fails before the job ended, the destructor stops it
// (SIGTERM, then SIGKILL), so a failed assertion never leaves a million-step job running.
struct LaunchedJob {
  pid_t pid = -1;
  std::string dir;  // scratch directory: stdout, stderr, logs/, config.json
  std::chrono::steady_clock::time_point started;
  mutable bool reaped = false;

  LaunchedJob() = default;
  LaunchedJob(const LaunchedJob&) = delete;
  LaunchedJob(LaunchedJob&& other) noexcept
      : pid(other.pid), dir(std::move(other.dir)), started(other.started), reaped(other.reaped) {
    other.reaped = true;
  }
  ~LaunchedJob();
};

void writeFile(const std::string& path, const std::string& text);
std::string readFile(const std::string& path);

// Runs build/bin/ds-launch with `args`, stdout/stderr to DIR/stdout and DIR/stderr; `wrapper`
// comes first when given (e.g. `ip netns exec NAME`, which execs ds-launch in the same process).
LaunchedJob startLaunch(const std::string& dir, const std::vector<std::string>& args,
                        const std::vector<std::string>& wrapper = {});

// Exit status as a shell reports it (128 + signal when killed); nullopt on timeout.
std::optional<int> waitExit(const LaunchedJob& job, std::chrono::milliseconds timeout);

struct WorkerInfo {
  pid_t pid;
  std::string host;
  int slot;
};
// Live children of `parent` whose command line is a ds-worker.
std::vector<WorkerInfo> findWorkers(pid_t parent);
bool processExists(pid_t pid);
// Live (non-zombie) processes whose command line contains `text` (e.g. a job's coordinator
// address, which every worker of the job carries, whatever started it).
std::vector<pid_t> processesMentioning(const std::string& text);
// The "coordinator HOST:PORT" ds-launch printed, once it has (empty on timeout).
std::string coordinatorAddressOf(const LaunchedJob& job, std::chrono::milliseconds timeout);

// Polls until `predicate` holds or the timeout passes.
bool waitUntil(std::chrono::milliseconds timeout, const std::function<bool()>& predicate);

}  // namespace ds::test
