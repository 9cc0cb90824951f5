// superviseJob: one thread. A ProcessPump reads the started processes' output (routed here by rank
// tag) and reaps them; every tick (50 ms) decideFailure judges the exits and the coordinator's
// health snapshot. Termination, dump and shrink signals set flags that the tick reads (their
// handlers are installed for the whole launch, before supervision).
#include "launcher/job_supervisor.h"

#include <signal.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "contract/rank_tag.h"
#include "contract/step_line.h"
#include "launcher/failure_policy.h"
#include "launcher/process_pump.h"

namespace ds::launcher {
namespace {

constexpr size_t kKeptLines = 20;
constexpr auto kTick = std::chrono::milliseconds(50);
constexpr auto kViewInterval = std::chrono::seconds(1);
// After the abort: how long what still runs has between SIGTERM and SIGKILL.
constexpr auto kTerminateGrace = std::chrono::milliseconds(500);

volatile std::sig_atomic_t gTerminationSignal = 0;
volatile std::sig_atomic_t gDumpRequested = 0;
volatile std::sig_atomic_t gShrinkRequested = 0;

void onTerminationSignal(int signal) { gTerminationSignal = signal; }
void onDumpSignal(int) { gDumpRequested = 1; }
void onShrinkSignal(int) { gShrinkRequested = 1; }

// Where each output line goes: a "[rank N]" tagged line to that rank's log (and the console for
// rank 0, or every rank when asked), its step to the rank's outcome; an untagged line (the
// runner's own words, or a worker's before it knew its rank) to every rank its process carries.
struct RankOutput {
  const std::vector<LaunchedProcess>& processes;
  RankLogs& logs;
  JobOutcome& outcome;
  LiveView& view;
  bool printAllRanks;

  void keep(size_t r, const std::string& line) {
    auto& kept = outcome.ranks[r].lastLines;
    kept.push_back(line);
    if (kept.size() > kKeptLines) kept.pop_front();
  }
  void line(size_t p, const std::string& line) {
    std::string text;
    const int tagged = parseRankTag(line, text);
    if (tagged >= 0 && tagged < static_cast<int>(outcome.ranks.size())) {
      logs.write(tagged, text);
      auto& logged = outcome.ranks[tagged].loggedStep;
      logged = std::max(logged, loggedStep(text));
      keep(tagged, text);
      if (printAllRanks || tagged == 0)
        view.printLine("[rank " + std::to_string(tagged) + "] " + text);
      return;
    }
    for (int r : processes[p].ranks) {
      logs.write(r, line);
      keep(r, line);
    }
    view.printLine("[" + processes[p].label + "] " + line);
  }
  // Logs are followed live (tail -f, CI) and must survive ds-launch being killed.
  void flush(size_t p) {
    for (int r : processes[p].ranks) logs.flush(r);
    std::cout.flush();
  }
};

// Elastic jobs: SIGUSR2 (with stopOnShrinkSignal) or stopWhen's reason sends every rank STOP,
// once.
void handleStopRequest(Coordinator& coordinator, const SupervisorOptions& options,
                       JobOutcome& outcome) {
  if (outcome.stoppedOnRequest) return;
  std::string reason;
  if (options.stopOnShrinkSignal && gShrinkRequested) {
    gShrinkRequested = 0;
    outcome.shrinkRequested = true;
    reason = "asked to shrink (SIGUSR2)";
  } else if (options.stopWhen) {
    reason = options.stopWhen();
  }
  if (reason.empty()) return;
  outcome.stoppedOnRequest = true;
  outcome.stopReason = reason;
  std::cerr << "ds-launch: " << reason << ": every rank checkpoints and stops\n";
  coordinator.broadcast(CommandKind::Stop, reason);
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

using Clock = std::chrono::steady_clock;

JobOutcome emptyOutcome(const std::vector<RankPlacement>& ranks, const RankLogs& logs) {
  JobOutcome outcome;
  outcome.ranks.resize(ranks.size());
  for (size_t r = 0; r < ranks.size(); ++r) {
    outcome.ranks[r].rank = ranks[r].rank;
    outcome.ranks[r].host = ranks[r].host;
  }
  outcome.logFiles = logs.paths();
  return outcome;
}

std::vector<SpawnedProcess> spawnedOf(const std::vector<LaunchedProcess>& processes) {
  std::vector<SpawnedProcess> spawned;
  for (const auto& launched : processes) spawned.push_back(launched.process);
  return spawned;
}

// One job under watch. What decideFailure judges: the processes' exits (kept up to date every
// tick) and the coordinator's health, one snapshot per tick (the loop condition reads the
// previous tick's). Members are in construction order: the pump routes output from its start.
class Supervision {
 public:
  Supervision(Coordinator& coordinator, const std::vector<RankPlacement>& ranks,
              std::vector<LaunchedProcess>& processes, RankLogs& logs,
              const SupervisorOptions& options)
      : coordinator_(coordinator),
        ranks_(ranks),
        processes_(processes),
        options_(options),
        outcome_(emptyOutcome(ranks, logs)),
        view_(std::cout, options.view),
        output_{processes, logs, outcome_, view_, options.printAllRanks},
        pump_(
            spawnedOf(processes),
            [this](size_t p, const std::string& line) { output_.line(p, line); },
            [this](size_t p) { output_.flush(p); }),
        exits_(ranks.size()),
        carried_(ranks.size(), false) {
    for (size_t p = 0; p < processes.size(); ++p) {
      if (processes[p].ranks.size() == 1) {
        exits_[processes[p].ranks[0]].ownProcess = true;
      } else {
        RunnerExit runner;
        runner.ranks = processes[p].ranks;
        runner.label = processes[p].label;
        runners_.push_back(std::move(runner));
        runnerProcess_.push_back(static_cast<int>(p));
      }
      for (int r : processes[p].ranks) carried_[r] = true;
    }
    health_ = coordinator.snapshot();
    started_ = Clock::now();
    evidence_.started = started_;
  }

  // Ticks until every process is gone (and every rank carried elsewhere has reported) or the job
  // has failed; then the last judgement.
  void watch() {
    auto lastView = started_ - kViewInterval;
    while ((pump_.running() > 0 || unreportedElsewhere()) && outcome_.failure.empty()) {
      pump_.poll(kTick);
      updateExits();
      const auto now = Clock::now();
      health_ = coordinator_.snapshot();
      evidence_.terminationSignal = gTerminationSignal;
      apply(decideFailure(evidence_, now));
      if (outcome_.failure.empty()) handleStopRequest(coordinator_, options_, outcome_);
      answerRequests();
      if (now - lastView >= kViewInterval) {
        view_.update(ranks_, health_);
        lastView = now;
      }
    }
    view_.finish();
    if (outcome_.failure.empty()) {
      evidence_.ended = true;
      apply(decideFailure(evidence_, Clock::now()));
    }
  }

  void stopEverything() {
    if (!outcome_.failure.empty()) {
      // Abort first so ranks blocked in a collective exit at once, then make sure with SIGKILL.
      coordinator_.broadcast(CommandKind::Abort, outcome_.failure);
      const auto deadline = Clock::now() + options_.abortGrace;
      while (pump_.running() > 0 && Clock::now() < deadline) pump_.poll(kTick);
    }
    pump_.terminate(kTerminateGrace);
    updateExits();
  }

  // The coordinator's last word on each rank's progress, and the report of a rank no process of
  // ours carried.
  JobOutcome finalOutcome() {
    health_ = coordinator_.snapshot();
    for (size_t r = 0; r < ranks_.size(); ++r) {
      auto& rank = outcome_.ranks[r];
      rank.steps = health_[r].progress.step;
      rank.lastLoss = health_[r].progress.loss;
      if (!rank.exitCode && !rank.signal && health_[r].report) {
        rank.exitCode = health_[r].report->exitStatus;
        rank.wallSeconds = health_[r].report->wallSeconds;
      }
    }
    return std::move(outcome_);
  }

 private:
  void updateExits() {
    for (size_t p = 0; p < processes_.size(); ++p) {
      const ProcessExit& exit = pump_.exit(p);
      if (!exit.exited) continue;
      const double wall =
          std::chrono::duration<double>(exit.exitedAt - processes_[p].process.started).count();
      for (int r : processes_[p].ranks) outcome_.ranks[r].wallSeconds = wall;
      if (processes_[p].ranks.size() != 1) continue;
      const int r = processes_[p].ranks[0];
      if (exit.signal)
        exits_[r].signal = exit.signal;
      else
        exits_[r].exitCode = exit.status;
      outcome_.ranks[r].signal = exits_[r].signal;
      outcome_.ranks[r].exitCode = exits_[r].exitCode;
    }
    for (size_t i = 0; i < runners_.size(); ++i) {
      const ProcessExit& exit = pump_.exit(runnerProcess_[i]);
      runners_[i].exited = exit.exited;
      runners_[i].status = exit.status;
      runners_[i].signal = exit.signal;
      runners_[i].exitedAt = exit.exitedAt;
    }
  }

  void apply(const FailureDecision& decision) {
    evidence_.pending = decision.pending;
    if (!decision.failure) return;
    outcome_.failedRank = decision.failure->rank;
    outcome_.failure = decision.failure->message;
    outcome_.exitStatus = decision.failure->exitStatus;
  }

  // Ranks no process of ours carries (--no_ssh: the other nodes start theirs) end with a report.
  bool unreportedElsewhere() const {
    for (size_t r = 0; r < ranks_.size(); ++r)
      if (!carried_[r] && !health_[r].report) return true;
    return false;
  }

  // SIGUSR1's state dump, and the start-up line once every rank has done its first step.
  void answerRequests() {
    if (gDumpRequested) {
      gDumpRequested = 0;
      std::cerr << "ds-launch: state of every rank (SIGUSR1)\n"
                << formatRankTable(ranks_, health_, options_.view.grid);
    }
    if (options_.launchStarted && !outcome_.startupSeconds) {
      if (const auto line =
              startupLine(health_, *options_.launchStarted, outcome_.startupSeconds)) {
        view_.printLine(*line);
        std::cout.flush();
      }
    }
  }

  Coordinator& coordinator_;
  const std::vector<RankPlacement>& ranks_;
  std::vector<LaunchedProcess>& processes_;
  const SupervisorOptions& options_;
  JobOutcome outcome_;
  LiveView view_;
  RankOutput output_;
  ProcessPump pump_;
  std::vector<RankExit> exits_;  // by rank
  std::vector<RunnerExit> runners_;
  std::vector<int> runnerProcess_;  // runners_[i] is processes_[runnerProcess_[i]]
  std::vector<bool> carried_;       // by rank: a process of ours carries it
  std::vector<RankStatus> health_;  // by rank
  Clock::time_point started_;
  JobEvidence evidence_{ranks_,
                        health_,
                        exits_,
                        runners_,
                        {options_.heartbeatTimeout, options_.stallTimeout, options_.joinTimeout},
                        {},
                        0,
                        std::nullopt,
                        false};
};

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

JobOutcome superviseJob(Coordinator& coordinator, const std::vector<RankPlacement>& ranks,
                        std::vector<LaunchedProcess>& processes, RankLogs& logs,
                        const SupervisorOptions& options) {
  Supervision supervision(coordinator, ranks, processes, logs, options);
  supervision.watch();
  supervision.stopEverything();
  return supervision.finalOutcome();
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
