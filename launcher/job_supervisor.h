// JobSupervisor: watches a running job until it ends, whatever backend started it. Routes output
// by its "[rank N]" tags (console: rank 0 only unless asked; one log file per rank), notices
// process exits, ranks whose coordinator stream broke, missed heartbeats, stalled steps and
// Ctrl-C/SIGTERM, and on any failure aborts every rank (coordinator command, then SIGKILL to each
// started process group) so no process of the job survives. SIGUSR1 prints every rank's state.
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "launcher/coordinator.h"
#include "launcher/live_view.h"
#include "launcher/log_files.h"
#include "launcher/worker_process.h"

namespace ds::launcher {

struct SupervisorOptions {
  bool printAllRanks = false;  // default: rank 0 only on the console
  std::chrono::milliseconds heartbeatTimeout{10000};
  std::chrono::milliseconds stallTimeout{0};  // 0: off
  std::chrono::milliseconds joinTimeout{60000};
  std::chrono::milliseconds abortGrace{1500};  // after the abort command, before SIGKILL
  // Elastic jobs: SIGUSR2 sends every rank STOP (they checkpoint and end at a step boundary),
  // and so does stopWhen returning a reason (polled every tick).
  bool stopOnShrinkSignal = false;
  std::function<std::string()> stopWhen;
  LiveViewOptions view;
  // Set: once every rank has done its first step, "start-up: S s" (from this moment until every
  // rank began training) is printed and kept in JobOutcome::startupSeconds.
  std::optional<std::chrono::steady_clock::time_point> launchStarted;
};

// A process ds-launch started: one rank's worker (local), one node's agent (ssh) or the whole
// job's runner (pdsh, mpirun, srun).
struct LaunchedProcess {
  SpawnedProcess process;
  std::vector<int> ranks;
  std::string label;  // for its untagged output and messages: "ssh 127.0.0.2", "mpirun"
};

struct RankOutcome {
  int rank = 0;
  std::string host;
  std::optional<int> exitCode;  // set when the rank ended with a status
  std::optional<int> signal;    // set when its process was killed by a signal
  double wallSeconds = 0.0;
  int64_t steps = 0;
  int64_t loggedStep = 0;  // the last finished step its output reported (contract/step_line.h)
  double lastLoss = 0.0;
  std::deque<std::string> lastLines;
};

struct JobOutcome {
  int exitStatus = 0;   // ds-launch's own exit status
  std::string failure;  // empty on success; names rank, host and cause otherwise
  std::optional<int> failedRank;
  std::vector<RankOutcome> ranks;
  std::vector<std::string> logFiles;  // per rank
  bool stoppedOnRequest = false;      // STOP was sent (SIGUSR2, or stopWhen)
  bool shrinkRequested = false;       // ... because of SIGUSR2
  std::string stopReason;
  std::optional<double> startupSeconds;  // launchStarted until every rank began training
};

// Installs SIGINT/SIGTERM/SIGHUP handlers that ask a running superviseJob to tear down, and
// SIGUSR1 for the state dump.
void installTerminationHandlers();
// SIGUSR2 asks a running superviseJob with stopOnShrinkSignal to stop the job gracefully.
void installShrinkHandler();

// `logs` has one file per rank, opened before the processes started.
JobOutcome superviseJob(Coordinator& coordinator, const std::vector<RankPlacement>& ranks,
                        std::vector<LaunchedProcess>& processes, RankLogs& logs,
                        const SupervisorOptions& options);

// The final table: rank, host, exit, steps, last loss, wall time.
std::string formatSummary(const JobOutcome& outcome);

}  // namespace ds::launcher
