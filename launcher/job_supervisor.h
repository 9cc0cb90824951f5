// JobSupervisor: watches a running job until it ends. Forwards worker output ([rank N] prefix on
// the console, one log file per rank), notices exits, missed heartbeats and Ctrl-C/SIGTERM, and on
// any failure aborts every rank (coordinator command, then SIGKILL to each process group) so no
// process of the job survives. Deliberately knows nothing about how workers were started.
#pragma once

#include <chrono>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "launcher/coordinator.h"
#include "launcher/worker_process.h"

namespace ds::launcher {

struct SupervisorOptions {
  bool printAllRanks = false;  // default: rank 0 only on the console
  std::string logDir;          // rank-N.log for every rank
  std::chrono::milliseconds heartbeatTimeout{10000};
  std::chrono::milliseconds joinTimeout{60000};
  std::chrono::milliseconds abortGrace{1500};  // after the abort command, before SIGKILL
};

struct RankOutcome {
  int rank = 0;
  std::string host;
  std::optional<int> exitCode;  // set when the process exited
  std::optional<int> signal;    // set when it was killed by a signal
  double wallSeconds = 0.0;
  int64_t steps = 0;
  double lastLoss = 0.0;
  std::deque<std::string> lastLines;
};

struct JobOutcome {
  int exitStatus = 0;   // ds-launch's own exit status
  std::string failure;  // empty on success; names rank, host and cause otherwise
  std::optional<int> failedRank;
  std::vector<RankOutcome> ranks;
};

// Installs SIGINT/SIGTERM/SIGHUP handlers that ask a running superviseJob to tear down.
void installTerminationHandlers();

JobOutcome superviseJob(Coordinator& coordinator, const std::vector<RankSlot>& ranks,
                        std::vector<SpawnedProcess>& processes, const SupervisorOptions& options);

// The final table: rank, host, exit, steps, last loss, wall time.
std::string formatSummary(const JobOutcome& outcome);

}  // namespace ds::launcher
