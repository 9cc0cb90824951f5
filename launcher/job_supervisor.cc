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
  const size_t n = ranks.size();
  JobOutcome outcome;
  outcome.ranks.resize(n);
  for (size_t r = 0; r < n; ++r) {
    outcome.ranks[r].rank = ranks[r].rank;
    outcome.ranks[r].host = ranks[r].host;
  }
  outcome.logFiles = logs.paths();

  LiveView view(std::cout, options.view);
  RankOutput output{processes, logs, outcome, view, options.printAllRanks};
  std::vector<SpawnedProcess> spawned;
  for (const auto& launched : processes) spawned.push_back(launched.process);
  ProcessPump pump(
      std::move(spawned), [&](size_t p, const std::string& line) { output.line(p, line); },
      [&](size_t p) { output.flush(p); });

  // What decideFailure judges: the processes' exits (kept up to date every tick) and the
  // coordinator's health, one snapshot per tick (the loop condition reads the previous tick's).
  std::vector<RankExit> exits(n);
  std::vector<RunnerExit> runners;
  std::vector<int> runnerProcess;
  for (size_t p = 0; p < processes.size(); ++p) {
    if (processes[p].ranks.size() == 1) {
      exits[processes[p].ranks[0]].ownProcess = true;
    } else {
      RunnerExit runner;
      runner.ranks = processes[p].ranks;
      runner.label = processes[p].label;
      runners.push_back(std::move(runner));
      runnerProcess.push_back(static_cast<int>(p));
    }
  }
  const auto updateExits = [&] {
    for (size_t p = 0; p < processes.size(); ++p) {
      const ProcessExit& exit = pump.exit(p);
      if (!exit.exited) continue;
      const double wall =
          std::chrono::duration<double>(exit.exitedAt - processes[p].process.started).count();
      for (int r : processes[p].ranks) outcome.ranks[r].wallSeconds = wall;
      if (processes[p].ranks.size() != 1) continue;
      const int r = processes[p].ranks[0];
      if (exit.signal)
        exits[r].signal = exit.signal;
      else
        exits[r].exitCode = exit.status;
      outcome.ranks[r].signal = exits[r].signal;
      outcome.ranks[r].exitCode = exits[r].exitCode;
    }
    for (size_t i = 0; i < runners.size(); ++i) {
      const ProcessExit& exit = pump.exit(runnerProcess[i]);
      runners[i].exited = exit.exited;
      runners[i].status = exit.status;
      runners[i].signal = exit.signal;
      runners[i].exitedAt = exit.exitedAt;
    }
  };
  std::vector<RankStatus> health = coordinator.snapshot();
  const auto started = std::chrono::steady_clock::now();
  JobEvidence evidence{ranks,
                       health,
                       exits,
                       runners,
                       {options.heartbeatTimeout, options.stallTimeout, options.joinTimeout},
                       started,
                       0,
                       std::nullopt,
                       false};
  const auto apply = [&](const FailureDecision& decision) {
    evidence.pending = decision.pending;
    if (!decision.failure) return;
    outcome.failedRank = decision.failure->rank;
    outcome.failure = decision.failure->message;
    outcome.exitStatus = decision.failure->exitStatus;
  };

  auto lastView = started - kViewInterval;
  // Ranks no process of ours carries (--no_ssh: the other nodes start theirs) end with a report.
  std::vector<bool> carried(n, false);
  for (const auto& launched : processes)
    for (int r : launched.ranks) carried[r] = true;
  auto unreportedElsewhere = [&] {
    for (size_t r = 0; r < n; ++r)
      if (!carried[r] && !health[r].report) return true;
    return false;
  };
  while ((pump.running() > 0 || unreportedElsewhere()) && outcome.failure.empty()) {
    pump.poll(kTick);
    updateExits();
    const auto now = std::chrono::steady_clock::now();
    health = coordinator.snapshot();
    evidence.terminationSignal = gTerminationSignal;
    apply(decideFailure(evidence, now));
    if (outcome.failure.empty()) handleStopRequest(coordinator, options, outcome);
    if (gDumpRequested) {
      gDumpRequested = 0;
      std::cerr << "ds-launch: state of every rank (SIGUSR1)\n" << formatRankTable(ranks, health, options.view.grid);
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
  if (outcome.failure.empty()) {
    evidence.ended = true;
    apply(decideFailure(evidence, std::chrono::steady_clock::now()));
  }

  if (!outcome.failure.empty()) {
    // Abort first so ranks blocked in a collective exit at once, then make sure with SIGKILL.
    coordinator.broadcast(CommandKind::Abort, outcome.failure);
    const auto deadline = std::chrono::steady_clock::now() + options.abortGrace;
    while (pump.running() > 0 && std::chrono::steady_clock::now() < deadline) pump.poll(kTick);
  }
  pump.terminate(kTerminateGrace);
  updateExits();

  health = coordinator.snapshot();
  for (size_t r = 0; r < n; ++r) {
    auto& rank = outcome.ranks[r];
    rank.steps = health[r].progress.step;
    rank.lastLoss = health[r].progress.loss;
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
