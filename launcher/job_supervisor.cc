// superviseJob: one thread, one Boost.Asio io_context: the started processes' output pipes are
// read as data arrives, SIGCHLD reaps an exited process at once, and every tick (50 ms, a timer)
// the coordinator's health snapshot is checked. Termination, dump and shrink signals set flags
// that the tick reads (their handlers are installed for the whole launch, before supervision).
#include "launcher/job_supervisor.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <sstream>

#include "common/error.h"
#include "contract/rank_tag.h"
#include "contract/step_line.h"

namespace ds::launcher {
namespace {

// Output lines longer than this are cut into pieces, so memory is bounded whatever a rank prints.
constexpr size_t kMaxLineBytes = 1 << 20;
constexpr size_t kReadChunk = 16384;  // per process and read

constexpr size_t kKeptLines = 20;
constexpr auto kTick = std::chrono::milliseconds(50);
constexpr auto kViewInterval = std::chrono::seconds(1);
// A runner (ssh, pdsh, mpirun, srun) that exited cleanly may still have ranks whose reports are
// in flight: how long to wait for them before calling the rank lost.
constexpr auto kReportGrace = std::chrono::seconds(2);
constexpr auto kBlameGrace = std::chrono::milliseconds(1000);

volatile std::sig_atomic_t gTerminationSignal = 0;
volatile std::sig_atomic_t gDumpRequested = 0;
volatile std::sig_atomic_t gShrinkRequested = 0;

void onTerminationSignal(int signal) { gTerminationSignal = signal; }
void onDumpSignal(int) { gDumpRequested = 1; }
void onShrinkSignal(int) { gShrinkRequested = 1; }

struct ProcessIo {
  std::string pending;                                          // bytes after the last newline
  std::unique_ptr<boost::asio::posix::stream_descriptor> pipe;  // owns the output fd while open
  std::vector<char> chunk;
  bool open = true;
  bool exited = false;
  int status = 0;  // exit code, or 128 + signal
  std::optional<int> signal;
  std::chrono::steady_clock::time_point exitedAt;
};

// A progress phase that says the rank waits in a collective for its peers ("... all_reduce").
bool inCollective(const std::string& phase) {
  for (const char* op : {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "barrier"})
    if (phase.find(op) != std::string::npos) return true;
  return false;
}

std::string signalName(int signal) {
  const char* name = sigabbrev_np(signal);
  return std::to_string(signal) + (name ? std::string(" (SIG") + name + ")" : "");
}

std::string describeExit(const RankOutcome& outcome) {
  if (outcome.signal) return "killed by signal " + signalName(*outcome.signal);
  if (outcome.exitCode) return "exited with status " + std::to_string(*outcome.exitCode);
  return "still running";
}

// Once every rank has done its first step: "ds-launch: start-up S s (...)", S (into `seconds`)
// from ds-launch's start until the last rank began training (model and engine built, its first
// step about to run): where GPT-NeoX's and Megatron's set-up timers stop, and so independent of how
// long a step takes. Beside it, when the last rank joined and when the last first step ended.
// Each comes from the rank's first heartbeat in that state; a rank seen past step 0 without a
// Training beat began training by then.
std::optional<std::string> startupLine(const std::vector<RankStatus>& health,
                                       std::chrono::steady_clock::time_point started,
                                       std::optional<double>& seconds) {
  using TimePoint = std::chrono::steady_clock::time_point;
  const auto latest = [&](auto when) -> std::optional<TimePoint> {
    std::optional<TimePoint> last;
    for (const RankStatus& status : health) {
      const std::optional<TimePoint> at = when(status);
      if (!at) return std::nullopt;
      last = std::max(last.value_or(*at), *at);
    }
    return last;
  };
  const auto since = [&](TimePoint at) {
    return std::chrono::duration<double>(at - started).count();
  };
  const auto firstStep = latest([](const RankStatus& s) { return s.firstStepAt; });
  if (!firstStep) return std::nullopt;  // also when there are no ranks
  const TimePoint training =
      *latest([](const RankStatus& s) { return s.trainingAt ? s.trainingAt : s.firstStepAt; });
  const TimePoint joined =
      *latest([](const RankStatus& s) { return std::optional<TimePoint>(s.joinedAt); });
  seconds = since(training);
  const auto format = [](double value) {
    char text[32];
    std::snprintf(text, sizeof(text), "%.2f s", value);
    return std::string(text);
  };
  return "ds-launch: start-up " + format(*seconds) +
         " (ds-launch start until every rank began training; all joined at " +
         format(since(joined)) + ", step 1 done by all at " + format(since(*firstStep)) + ")";
}

}  // namespace

void installTerminationHandlers() {
  struct sigaction action {};
  action.sa_handler = onTerminationSignal;
  sigemptyset(&action.sa_mask);
  for (int signal : {SIGINT, SIGTERM, SIGHUP}) sigaction(signal, &action, nullptr);
  action.sa_handler = onDumpSignal;
  sigaction(SIGUSR1, &action, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
}

void installShrinkHandler() {
  struct sigaction action {};
  action.sa_handler = onShrinkSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGUSR2, &action, nullptr);
}

JobOutcome superviseJob(Coordinator& coordinator, const std::vector<RankSlot>& ranks,
                        std::vector<LaunchedProcess>& processes, RankLogs& logs,
                        const SupervisorOptions& options) {
  const size_t n = ranks.size();
  JobOutcome outcome;
  outcome.ranks.resize(n);
  std::vector<int> processOfRank(n, -1);  // only for processes that carry exactly one rank
  for (size_t p = 0; p < processes.size(); ++p)
    if (processes[p].ranks.size() == 1) processOfRank[processes[p].ranks[0]] = static_cast<int>(p);
  for (size_t r = 0; r < n; ++r) {
    outcome.ranks[r].rank = ranks[r].rank;
    outcome.ranks[r].host = ranks[r].host;
  }
  outcome.logFiles = logs.paths();

  LiveView view(std::cout, options.view);
  std::vector<ProcessIo> io(processes.size());
  auto keep = [&](size_t r, const std::string& line) {
    auto& kept = outcome.ranks[r].lastLines;
    kept.push_back(line);
    if (kept.size() > kKeptLines) kept.pop_front();
  };
  auto emitLine = [&](size_t p, const std::string& line) {
    std::string text;
    const int tagged = parseRankTag(line, text);
    if (tagged >= 0 && tagged < static_cast<int>(n)) {
      logs.write(tagged, text);
      auto& logged = outcome.ranks[tagged].loggedStep;
      logged = std::max(logged, loggedStep(text));
      keep(tagged, text);
      if (options.printAllRanks || tagged == 0)
        view.printLine("[rank " + std::to_string(tagged) + "] " + text);
      return;
    }
    // Untagged: the runner's own words (ssh, mpirun) or a worker before it knew its rank.
    for (int r : processes[p].ranks) {
      logs.write(r, line);
      keep(r, line);
    }
    view.printLine("[" + processes[p].label + "] " + line);
  };
  boost::asio::io_context loop;
  // What was read reaches the files and the console now, not when a buffer fills: logs are
  // followed live (tail -f, CI) and must survive ds-launch being killed.
  auto flushLogs = [&](size_t p) {
    for (int r : processes[p].ranks) logs.flush(r);
    std::cout.flush();
  };
  auto closePipe = [&](size_t p) {
    if (!io[p].open) return;
    if (!io[p].pending.empty()) emitLine(p, io[p].pending);
    io[p].pending.clear();
    boost::system::error_code ignored;
    io[p].pipe->close(ignored);
    io[p].open = false;
    flushLogs(p);
  };
  std::function<void(size_t)> readOutput = [&](size_t p) {
    io[p].pipe->async_read_some(
        boost::asio::buffer(io[p].chunk),
        [&, p](const boost::system::error_code& error, size_t got) {
          if (error == boost::asio::error::operation_aborted) return;  // closed by us
          if (got > 0) {
            io[p].pending.append(io[p].chunk.data(), got);
            size_t start = 0, newline;
            while ((newline = io[p].pending.find('\n', start)) != std::string::npos) {
              emitLine(p, io[p].pending.substr(start, newline - start));
              start = newline + 1;
            }
            // Workers cut long lines themselves; this bounds what other programs (ssh, mpirun)
            // send.
            for (; io[p].pending.size() - start >= kMaxLineBytes; start += kMaxLineBytes)
              emitLine(p, io[p].pending.substr(start, kMaxLineBytes));
            io[p].pending.erase(0, start);
            flushLogs(p);
          }
          if (error) return closePipe(p);  // end of file: the process and its children are gone
          readOutput(p);
        });
  };
  for (size_t p = 0; p < processes.size(); ++p) {
    io[p].pipe = std::make_unique<boost::asio::posix::stream_descriptor>(
        loop, processes[p].process.outputFd);
    io[p].chunk.resize(kReadChunk);
    readOutput(p);
  }
  size_t running = processes.size();
  auto reap = [&](bool block) {
    for (size_t p = 0; p < processes.size(); ++p) {
      if (io[p].exited) continue;
      int status = 0;
      const pid_t got = waitpid(processes[p].process.pid, &status, block ? 0 : WNOHANG);
      if (got != processes[p].process.pid) continue;
      io[p].exited = true;
      io[p].exitedAt = std::chrono::steady_clock::now();
      if (WIFSIGNALED(status)) io[p].signal = WTERMSIG(status);
      io[p].status = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
      --running;
      const double wall =
          std::chrono::duration<double>(io[p].exitedAt - processes[p].process.started).count();
      for (int r : processes[p].ranks) outcome.ranks[r].wallSeconds = wall;
      if (processes[p].ranks.size() == 1) {
        auto& rank = outcome.ranks[processes[p].ranks[0]];
        if (io[p].signal)
          rank.signal = io[p].signal;
        else
          rank.exitCode = io[p].status;
      }
    }
  };
  // Runs the loop for up to `timeout`: output is handled as it arrives, and an exited child ends
  // the wait early so that the checks see it at once.
  boost::asio::steady_timer tick(loop);
  boost::asio::signal_set childExits(loop, SIGCHLD);
  std::function<void()> awaitChildExit = [&] {
    childExits.async_wait([&](const boost::system::error_code& error, int) {
      if (error) return;
      reap(false);
      loop.stop();
      awaitChildExit();
    });
  };
  awaitChildExit();
  reap(false);  // children that exited before the handler was there
  auto pollOutput = [&](std::chrono::milliseconds timeout) {
    tick.expires_after(timeout);
    tick.async_wait([&](const boost::system::error_code& error) {
      if (!error) loop.stop();
    });
    loop.restart();
    loop.run();
  };
  // A rank that fails because a peer vanished mid-collective usually reports before the vanished
  // peer is noticed. Such "secondary" failures wait kBlameGrace for a root cause (a rank killed,
  // lost, silent or stalled) to take the blame; the first root cause wins at once.
  struct Failure {
    int rank;
    std::string cause;
    int exitStatus;
    std::chrono::steady_clock::time_point seen;
  };
  std::optional<Failure> secondary;
  auto commit = [&](int r, const std::string& cause, int exitStatus) {
    outcome.failedRank = r;
    outcome.failure = "rank " + std::to_string(r) + " (host " + ranks[r].host + ") " + cause;
    outcome.exitStatus = exitStatus;
  };
  auto fail = [&](int r, const std::string& cause, int exitStatus, bool rootCause = true) {
    if (!outcome.failure.empty()) return;
    if (rootCause) {
      commit(r, cause, exitStatus);
    } else if (!secondary) {
      secondary = Failure{r, cause, exitStatus, std::chrono::steady_clock::now()};
    }
  };
  auto ms = [](std::chrono::milliseconds d) { return std::to_string(d.count()) + " ms"; };

  const auto started = std::chrono::steady_clock::now();
  auto lastView = started - kViewInterval;
  // Ranks no process of ours carries (--no_ssh: the other nodes start theirs) end with a report.
  std::vector<bool> carried(n, false);
  for (const auto& launched : processes)
    for (int r : launched.ranks) carried[r] = true;
  // One snapshot per tick; the loop condition reads the previous tick's.
  std::vector<RankStatus> health = coordinator.snapshot();
  auto unreportedElsewhere = [&] {
    for (size_t r = 0; r < n; ++r)
      if (!carried[r] && !health[r].report) return true;
    return false;
  };
  while ((running > 0 || unreportedElsewhere()) && outcome.failure.empty()) {
    pollOutput(kTick);
    reap(false);
    const auto now = std::chrono::steady_clock::now();
    health = coordinator.snapshot();
    for (size_t r = 0; r < n && outcome.failure.empty(); ++r) {
      const auto& rank = outcome.ranks[r];
      const auto& status = health[r];
      if (rank.signal) {
        fail(r, describeExit(rank), 128 + *rank.signal);
      } else if (rank.exitCode && *rank.exitCode != 0) {
        fail(r, describeExit(rank) + (status.report ? ": " + status.report->error : ""),
             *rank.exitCode, false);
      } else if (status.report && status.report->exitStatus != 0) {
        fail(r, "failed: " + status.report->error, status.report->exitStatus, false);
      } else if (rank.exitCode || status.report) {
        continue;  // finished
      } else if (status.lost && processOfRank[r] < 0) {
        // Its stream broke with no report: the process died somewhere we cannot waitpid. When
        // several broke, the first one is the cause.
        size_t first = r;
        for (size_t other = 0; other < n; ++other)
          if (health[other].lost && !health[other].report && processOfRank[other] < 0 &&
              health[other].lostAt < health[first].lostAt)
            first = other;
        fail(first, "lost its connection to the coordinator without reporting (its process died)",
             1);
      } else if (!status.joined) {
        if (now - started > options.joinTimeout)
          fail(r, "did not join the coordinator within " + ms(options.joinTimeout), 1);
      } else if (now - status.lastHeartbeat > options.heartbeatTimeout) {
        // A rank whose process hosts its node's relay takes the node's heartbeats with it when
        // it stops: among the silent ranks, the blame is the relay host's.
        size_t blamed = r;
        for (size_t other = 0; other < n; ++other)
          if (health[other].hostsRelay && !health[other].report &&
              now - health[other].lastHeartbeat > options.heartbeatTimeout)
            blamed = other;
        const auto& silent = health[blamed];
        fail(blamed,
             "stopped heartbeating (no heartbeat for " + ms(options.heartbeatTimeout) +
                 ", at step " + std::to_string(silent.step) + ", state " +
                 rankStateName(silent.state) + ", phase: " + silent.phase + ")",
             1);
      } else if (options.stallTimeout.count() > 0 && status.step > 0 &&
                 now - status.lastProgress > options.stallTimeout) {
        // Ranks in a collective with a stuck peer stall too: list every stalled rank's phase so
        // the one that is not waiting on the others stands out. Peers stop a heartbeat or so
        // after the stuck rank, so those past half the timeout count too.
        // The blame goes to a stalled rank that is not itself waiting in a collective (they
        // all stop within a heartbeat of each other, so "first noticed" would be arbitrary).
        std::string phases;
        size_t blamed = r;
        bool blamedOutsideCollective = false;
        for (size_t other = 0; other < n; ++other)
          if (health[other].joined && now - health[other].lastProgress > options.stallTimeout / 2) {
            phases += "\n  rank " + std::to_string(other) + " (" + ranks[other].host + ") step " +
                      std::to_string(health[other].step) + ": " + health[other].phase;
            if (!blamedOutsideCollective && !inCollective(health[other].phase)) {
              blamed = other;
              blamedOutsideCollective = true;
            }
          }
        fail(static_cast<int>(blamed),
             "stalled: step " + std::to_string(health[blamed].step) + " has not advanced for " +
                 ms(options.stallTimeout) + " while still heartbeating; stalled ranks:" + phases,
             1);
      }
    }
    // A runner that ended while some of its ranks never reported.
    for (size_t p = 0; p < processes.size() && outcome.failure.empty(); ++p) {
      if (!io[p].exited || processes[p].ranks.size() == 1) continue;
      for (int r : processes[p].ranks) {
        if (health[r].report) continue;
        if (io[p].status != 0)
          fail(r,
               "stopped: " + processes[p].label + " exited with status " +
                   std::to_string(io[p].status) +
                   (io[p].signal ? " (signal " + signalName(*io[p].signal) + ")" : ""),
               io[p].status, false);
        else if (now - io[p].exitedAt > kReportGrace)
          fail(r, "ended without reporting (" + processes[p].label + " exited 0)", 1);
        if (!outcome.failure.empty() || secondary) break;
      }
    }
    if (outcome.failure.empty() && secondary && now - secondary->seen >= kBlameGrace)
      commit(secondary->rank, secondary->cause, secondary->exitStatus);
    if (gTerminationSignal != 0 && outcome.failure.empty()) {
      const int signal = gTerminationSignal;
      outcome.failure = std::string("interrupted by SIG") + sigabbrev_np(signal);
      outcome.exitStatus = 128 + signal;
    }
    if (!outcome.stoppedOnRequest && outcome.failure.empty()) {
      std::string reason;
      if (options.stopOnShrinkSignal && gShrinkRequested) {
        gShrinkRequested = 0;
        outcome.shrinkRequested = true;
        reason = "asked to shrink (SIGUSR2)";
      } else if (options.stopWhen) {
        reason = options.stopWhen();
      }
      if (!reason.empty()) {
        outcome.stoppedOnRequest = true;
        outcome.stopReason = reason;
        std::cerr << "ds-launch: " << reason << ": every rank checkpoints and stops\n";
        coordinator.broadcast(CommandKind::Stop, reason);
      }
    }
    if (gDumpRequested) {
      gDumpRequested = 0;
      std::cerr << "ds-launch: state of every rank (SIGUSR1)\n" << formatRankTable(ranks, health);
    }
    if (options.launchStarted && !outcome.startupSeconds) {
      if (const auto line = startupLine(health, *options.launchStarted, outcome.startupSeconds)) {
        view.printLine(*line);
        std::cout.flush();
      }
    }
    if (now - lastView >= kViewInterval) {
      view.update(ranks, health);
      lastView = now;
    }
  }
  view.finish();
  if (outcome.failure.empty() && secondary)
    commit(secondary->rank, secondary->cause, secondary->exitStatus);

  if (!outcome.failure.empty()) {
    // Abort first so ranks blocked in a collective exit at once, then make sure with SIGKILL.
    coordinator.broadcast(CommandKind::Abort, outcome.failure);
    const auto deadline = std::chrono::steady_clock::now() + options.abortGrace;
    while (running > 0 && std::chrono::steady_clock::now() < deadline) {
      pollOutput(kTick);
      reap(false);
    }
  }
  // What is still running gets SIGTERM first, so that each worker stops its program's own process
  // group (the program's children are not in the worker's group), then SIGKILL for the rest.
  if (running > 0) {
    for (const auto& launched : processes) ::kill(-launched.process.pid, SIGTERM);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
    while (running > 0 && std::chrono::steady_clock::now() < deadline) {
      pollOutput(kTick);
      reap(false);
    }
  }
  for (const auto& launched : processes) killProcessGroup(launched.process.pid);
  reap(true);
  // Output still in the pipes; bounded, in case something outside the groups holds a write end.
  const auto drainDeadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (std::chrono::steady_clock::now() < drainDeadline &&
         std::any_of(io.begin(), io.end(), [](const ProcessIo& x) { return x.open; }))
    pollOutput(kTick);
  for (size_t p = 0; p < processes.size(); ++p) closePipe(p);

  health = coordinator.snapshot();
  for (size_t r = 0; r < n; ++r) {
    auto& rank = outcome.ranks[r];
    rank.steps = health[r].step;
    rank.lastLoss = health[r].loss;
    if (!rank.exitCode && !rank.signal && health[r].report) {
      rank.exitCode = health[r].report->exitStatus;
      rank.wallSeconds = health[r].report->wallSeconds;
    }
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
    // A program that reports no training progress (any external script) has no steps or loss
    // to show: "-", not a made-up 0.
    char steps[32] = "-", loss[32] = "-";
    if (rank.steps > 0) {
      std::snprintf(steps, sizeof(steps), "%lld", static_cast<long long>(rank.steps));
      std::snprintf(loss, sizeof(loss), "%.6f", rank.lastLoss);
    }
    std::snprintf(line, sizeof(line), "%-5d %-16s %-22s %7s %12s %9.2f\n", rank.rank,
                  rank.host.c_str(), exit.c_str(), steps, loss, rank.wallSeconds);
    out << line;
  }
  return out.str();
}

}  // namespace ds::launcher
