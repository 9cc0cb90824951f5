// ProcessPump: the processes ds-launch started, on one thread and one Boost.Asio io_context: their
// output pipes are read as data arrives and cut into lines, SIGCHLD reaps an exited process at
// once. It knows nothing of ranks or failures: superviseJob routes the lines and judges the exits.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "launcher/worker_process.h"

namespace ds::launcher {

struct ProcessExit {
  bool exited = false;
  int status = 0;  // exit code, or 128 + signal
  std::optional<int> signal;
  std::chrono::steady_clock::time_point exitedAt{};
};

class ProcessPump {
 public:
  // onLine(p, line): a complete line of process p's output (long lines come in pieces);
  // onFlush(p): what p printed so far has been handed to onLine, flush it onwards.
  using LineHandler = std::function<void(size_t, const std::string&)>;
  using FlushHandler = std::function<void(size_t)>;
  ProcessPump(std::vector<SpawnedProcess> processes, LineHandler onLine, FlushHandler onFlush);
  ~ProcessPump();
  ProcessPump(const ProcessPump&) = delete;
  ProcessPump& operator=(const ProcessPump&) = delete;

  // Handles output as it arrives for up to `timeout`; a child's exit ends the wait early, so that
  // the caller sees it at once.
  void poll(std::chrono::milliseconds timeout);
  size_t running() const { return running_; }
  const ProcessExit& exit(size_t p) const;
  // What is still running gets SIGTERM (a worker then stops its program's own process group),
  // `grace` later SIGKILL to every process group; then every process is reaped and the output
  // still in the pipes is read (for at most a second: something outside the groups may hold a
  // write end).
  void terminate(std::chrono::milliseconds grace);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  size_t running_ = 0;
};

}  // namespace ds::launcher
