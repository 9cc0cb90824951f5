// superviseJob: a single-threaded poll loop over the workers' output pipes, with waitpid and the
// coordinator's health snapshot checked every tick (50 ms), so an exit is seen within one tick.
#include "launcher/job_supervisor.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "runtime/common/error.h"

namespace ds::launcher {
namespace {

constexpr size_t kKeptLines = 20;
constexpr auto kTick = std::chrono::milliseconds(50);

volatile std::sig_atomic_t gTerminationSignal = 0;

void onTerminationSignal(int signal) { gTerminationSignal = signal; }

struct RankIo {
  std::ofstream log;
  std::string pending;  // bytes after the last newline
  bool open = true;
};

std::string describeExit(const RankOutcome& outcome) {
  if (outcome.signal) {
    const char* name = sigabbrev_np(*outcome.signal);
    return "killed by signal " + std::to_string(*outcome.signal) +
           (name ? std::string(" (SIG") + name + ")" : "");
  }
  if (outcome.exitCode) return "exited with status " + std::to_string(*outcome.exitCode);
  return "still running";
}

}  // namespace

void installTerminationHandlers() {
  struct sigaction action {};
  action.sa_handler = onTerminationSignal;
  sigemptyset(&action.sa_mask);
  for (int signal : {SIGINT, SIGTERM, SIGHUP}) sigaction(signal, &action, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
}

JobOutcome superviseJob(Coordinator& coordinator, const std::vector<RankSlot>& ranks,
                        std::vector<SpawnedProcess>& processes, const SupervisorOptions& options) {
  const size_t n = ranks.size();
  JobOutcome outcome;
  outcome.ranks.resize(n);
  std::vector<RankIo> io(n);
  std::filesystem::create_directories(options.logDir);
  for (size_t r = 0; r < n; ++r) {
    outcome.ranks[r].rank = ranks[r].rank;
    outcome.ranks[r].host = ranks[r].host;
    const auto path =
        std::filesystem::path(options.logDir) / ("rank-" + std::to_string(r) + ".log");
    io[r].log.open(path);
    if (!io[r].log) throw Error("cannot write log file " + path.string());
  }

  auto emitLine = [&](size_t r, const std::string& line) {
    io[r].log << line << '\n';
    auto& kept = outcome.ranks[r].lastLines;
    kept.push_back(line);
    if (kept.size() > kKeptLines) kept.pop_front();
    if (options.printAllRanks || r == 0) std::cout << "[rank " << r << "] " << line << '\n';
  };
  auto drain = [&](size_t r) {
    if (!io[r].open) return;
    char buffer[65536];
    for (;;) {
      const ssize_t got = read(processes[r].outputFd, buffer, sizeof(buffer));
      if (got > 0) {
        io[r].pending.append(buffer, static_cast<size_t>(got));
        size_t start = 0, newline;
        while ((newline = io[r].pending.find('\n', start)) != std::string::npos) {
          emitLine(r, io[r].pending.substr(start, newline - start));
          start = newline + 1;
        }
        io[r].pending.erase(0, start);
        continue;
      }
      if (got == 0 || (errno != EAGAIN && errno != EINTR)) {
        if (!io[r].pending.empty()) emitLine(r, io[r].pending);
        io[r].pending.clear();
        close(processes[r].outputFd);
        io[r].open = false;
      }
      return;
    }
  };
  size_t running = n;
  auto reap = [&](bool block) {
    for (size_t r = 0; r < n; ++r) {
      auto& rank = outcome.ranks[r];
      if (rank.exitCode || rank.signal) continue;
      int status = 0;
      const pid_t got = waitpid(processes[r].pid, &status, block ? 0 : WNOHANG);
      if (got != processes[r].pid) continue;
      if (WIFEXITED(status)) rank.exitCode = WEXITSTATUS(status);
      if (WIFSIGNALED(status)) rank.signal = WTERMSIG(status);
      rank.wallSeconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - processes[r].started)
              .count();
      --running;
    }
  };
  auto pollOutput = [&](std::chrono::milliseconds timeout) {
    std::vector<pollfd> fds;
    std::vector<size_t> owners;
    for (size_t r = 0; r < n; ++r)
      if (io[r].open) {
        fds.push_back({processes[r].outputFd, POLLIN, 0});
        owners.push_back(r);
      }
    if (fds.empty()) {
      std::this_thread::sleep_for(timeout);
      return;
    }
    if (poll(fds.data(), fds.size(), static_cast<int>(timeout.count())) > 0)
      for (size_t i = 0; i < fds.size(); ++i)
        if (fds[i].revents) drain(owners[i]);
  };
  auto fail = [&](size_t r, const std::string& cause, int exitStatus) {
    if (!outcome.failure.empty()) return;
    outcome.failedRank = static_cast<int>(r);
    outcome.failure = "rank " + std::to_string(r) + " (host " + ranks[r].host + ") " + cause;
    outcome.exitStatus = exitStatus;
  };

  const auto started = std::chrono::steady_clock::now();
  while (running > 0 && outcome.failure.empty()) {
    pollOutput(kTick);
    reap(false);
    const auto now = std::chrono::steady_clock::now();
    for (size_t r = 0; r < n && outcome.failure.empty(); ++r) {
      const auto& rank = outcome.ranks[r];
      if (rank.signal)
        fail(r, describeExit(rank), 128 + *rank.signal);
      else if (rank.exitCode && *rank.exitCode != 0)
        fail(r, describeExit(rank), *rank.exitCode);
    }
    if (gTerminationSignal != 0 && outcome.failure.empty()) {
      const int signal = gTerminationSignal;
      outcome.failure = std::string("interrupted by SIG") + sigabbrev_np(signal);
      outcome.exitStatus = 128 + signal;
    }
    if (!outcome.failure.empty()) break;
    const auto health = coordinator.snapshot();
    for (size_t r = 0; r < n && outcome.failure.empty(); ++r) {
      if (outcome.ranks[r].exitCode) continue;
      if (!health[r].joined) {
        if (now - started > options.joinTimeout)
          fail(r,
               "did not join the coordinator within " +
                   std::to_string(options.joinTimeout.count() / 1000) + " s",
               1);
      } else if (!health[r].report && now - health[r].lastHeartbeat > options.heartbeatTimeout) {
        fail(r,
             "stopped heartbeating (no heartbeat for " +
                 std::to_string(options.heartbeatTimeout.count()) + " ms, at step " +
                 std::to_string(health[r].step) + ", state " + rankStateName(health[r].state) + ")",
             1);
      }
    }
  }

  if (!outcome.failure.empty()) {
    // Abort first so ranks blocked in a collective exit at once, then make sure with SIGKILL.
    coordinator.broadcast(Command::Abort, outcome.failure);
    const auto deadline = std::chrono::steady_clock::now() + options.abortGrace;
    while (running > 0 && std::chrono::steady_clock::now() < deadline) {
      pollOutput(kTick);
      reap(false);
    }
  }
  for (size_t r = 0; r < n; ++r) killProcessGroup(processes[r].pid);
  reap(true);
  // Output still in the pipes; bounded, in case something outside the groups holds a write end.
  const auto drainDeadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (std::chrono::steady_clock::now() < drainDeadline &&
         std::any_of(io.begin(), io.end(), [](const RankIo& x) { return x.open; }))
    pollOutput(kTick);
  for (size_t r = 0; r < n; ++r)
    if (io[r].open) close(processes[r].outputFd);

  const auto health = coordinator.snapshot();
  for (size_t r = 0; r < n; ++r) {
    outcome.ranks[r].steps = health[r].step;
    outcome.ranks[r].lastLoss = health[r].loss;
  }
  return outcome;
}

std::string formatSummary(const JobOutcome& outcome) {
  std::ostringstream out;
  char line[256];
  std::snprintf(line, sizeof(line), "%-5s %-16s %-22s %7s %12s %9s\n", "rank", "host", "exit",
                "steps", "last loss", "wall s");
  out << line;
  for (const auto& rank : outcome.ranks) {
    std::string exit = rank.signal     ? "signal " + std::to_string(*rank.signal)
                       : rank.exitCode ? std::to_string(*rank.exitCode)
                                       : "-";
    std::snprintf(line, sizeof(line), "%-5d %-16s %-22s %7lld %12.6f %9.2f\n", rank.rank,
                  rank.host.c_str(), exit.c_str(), static_cast<long long>(rank.steps),
                  rank.lastLoss, rank.wallSeconds);
    out << line;
  }
  return out.str();
}

}  // namespace ds::launcher
