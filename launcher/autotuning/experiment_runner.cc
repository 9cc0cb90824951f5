// runExperiment: spawn, wait with a deadline, stop cleanly, read the metric file.
#include "launcher/autotuning/experiment_runner.h"

#include <sys/wait.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <thread>

#include "common/spawn.h"

namespace ds::launcher {
namespace {

using Clock = std::chrono::steady_clock;
// ds-launch stops its ranks within its own grace; this covers that and its report.
constexpr auto kStopGrace = std::chrono::seconds(20);

// Waits up to `limit` for `pid`; its status when it exited.
std::optional<int> waitUpTo(pid_t pid, Clock::duration limit) {
  const auto until = Clock::now() + limit;
  for (;;) {
    int status = 0;
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
    if (done < 0 && errno != EINTR) return 127;
    if (Clock::now() >= until) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

// SIGTERM (ds-launch stops its ranks and reports), then SIGKILL to its whole group.
int stop(pid_t pid) {
  kill(pid, SIGTERM);
  if (const auto status = waitUpTo(pid, kStopGrace)) return *status;
  kill(-pid, SIGKILL);
  return waitForExit(pid);
}

}  // namespace

const char* experimentStatusName(ExperimentStatus status) {
  switch (status) {
    case ExperimentStatus::Ok:
      return "ok";
    case ExperimentStatus::Failed:
      return "failed";
    case ExperimentStatus::TimedOut:
      return "timed out";
    case ExperimentStatus::Interrupted:
      return "interrupted";
  }
  return "?";
}

std::string lastErrorLine(const std::string& path) {
  std::ifstream in(path);
  std::string line, last, lastError;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    last = line;
    if (line.find("rror") != std::string::npos || line.find("refused") != std::string::npos ||
        line.find("Killed") != std::string::npos || line.find("pre-flight") != std::string::npos)
      lastError = line;
  }
  return lastError.empty() ? last : lastError;
}

ExperimentOutcome runExperiment(const ExperimentCommand& command,
                                const std::atomic<bool>& interrupted) {
  ExperimentOutcome out;
  std::filesystem::create_directories(command.dir);
  std::filesystem::remove(command.metricPath);
  SpawnOptions options;
  options.argv = command.argv;
  options.stdoutPath = command.dir + "/stdout.log";
  options.stderrPath = command.dir + "/stderr.log";
  options.label = "ds-launch --autotuning";
  const auto start = Clock::now();
  const Spawned child = spawnProcess(options);
  const auto deadline = start + command.timeout;
  std::optional<int> status;
  while (!status) {
    status = waitUpTo(child.pid, std::chrono::milliseconds(200));
    if (status) break;
    if (interrupted) {
      out.exitStatus = stop(child.pid);
      out.status = ExperimentStatus::Interrupted;
      out.why = "interrupted";
      out.wallSeconds = std::chrono::duration<double>(Clock::now() - start).count();
      return out;
    }
    if (Clock::now() >= deadline) {
      out.exitStatus = stop(child.pid);
      out.status = ExperimentStatus::TimedOut;
      out.why = "no result within " + std::to_string(command.timeout.count()) +
                " s (--autotuning_timeout)";
      out.wallSeconds = std::chrono::duration<double>(Clock::now() - start).count();
      return out;
    }
  }
  out.exitStatus = *status;
  out.wallSeconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (std::ifstream in(command.metricPath); in) {
    try {
      out.metrics = nlohmann::json::parse(in);
    } catch (const std::exception& e) {
      out.why = command.metricPath + ": not JSON (" + e.what() + ")";
    }
  }
  if (out.exitStatus == 0 && out.metrics && out.metrics->is_object()) {
    out.status = ExperimentStatus::Ok;
    return out;
  }
  out.status = ExperimentStatus::Failed;
  if (out.exitStatus != 0) {
    std::string line = lastErrorLine(options.stderrPath);
    if (line.empty()) line = lastErrorLine(options.stdoutPath);
    out.why = "exit " + std::to_string(out.exitStatus) + (line.empty() ? "" : ": " + line);
  } else if (out.why.empty()) {
    out.why = "the job wrote no metric file at " + command.metricPath;
  }
  return out;
}

}  // namespace ds::launcher
