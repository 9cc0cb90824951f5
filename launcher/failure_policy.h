// FailurePolicy: whether a running job has failed and which rank is to blame, as a pure function
// of what ds-launch knows (the coordinator's health snapshot, the processes' exits, the timeouts)
// and the time. It decides; superviseJob gathers the evidence, applies the decision and tears down.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "launcher/coordinator.h"

namespace ds::launcher {

using SteadyTime = std::chrono::steady_clock::time_point;

// A rank that fails because a peer vanished mid-collective usually reports before the vanished
// peer is noticed. Such a "secondary" failure waits this long for a root cause (a rank killed,
// lost, silent or stalled) to take the blame.
inline constexpr auto kBlameGrace = std::chrono::milliseconds(1000);
// A runner (ssh, pdsh, mpirun, srun) that exited cleanly may still have ranks whose reports are
// in flight: how long to wait for them before calling the rank lost.
inline constexpr auto kReportGrace = std::chrono::seconds(2);

// How a rank's own process ended, when ds-launch started a process for it alone (local launches).
struct RankExit {
  bool ownProcess = false;  // its fate is known from waitpid, not only from the coordinator
  std::optional<int> exitCode;
  std::optional<int> signal;
};

// A process carrying several ranks (a node's ssh session, mpirun, srun).
struct RunnerExit {
  std::vector<int> ranks;
  std::string label;  // "ssh 127.0.0.2", "mpirun"
  bool exited = false;
  int status = 0;  // exit code, or 128 + signal
  std::optional<int> signal;
  SteadyTime exitedAt{};
};

struct FailureTimeouts {
  std::chrono::milliseconds heartbeat{10000};
  std::chrono::milliseconds stall{0};  // 0: off
  std::chrono::milliseconds join{60000};
};

struct JobFailure {
  std::optional<int> rank;  // none: the job was interrupted
  std::string message;      // "rank 2 (host node-1) stopped heartbeating (...)"
  int exitStatus = 1;       // ds-launch's exit status
  SteadyTime seen{};        // when it was first noticed
};

struct JobEvidence {
  const std::vector<RankPlacement>& ranks;
  const std::vector<RankStatus>& health;  // by rank
  const std::vector<RankExit>& exits;     // by rank
  const std::vector<RunnerExit>& runners;
  FailureTimeouts timeouts;
  SteadyTime started{};               // when supervision began: the join timeout counts from here
  int terminationSignal = 0;          // SIGINT/SIGTERM/SIGHUP that ds-launch received, or 0
  std::optional<JobFailure> pending;  // the secondary failure the last decision kept
  bool ended = false;  // every process is gone: no root cause is coming, a pending one stands
};

struct FailureDecision {
  std::optional<JobFailure> failure;  // the job has failed: abort every rank
  std::optional<JobFailure> pending;  // a secondary failure waiting kBlameGrace for a root cause
};

FailureDecision decideFailure(const JobEvidence& evidence, SteadyTime now);

// ", in all_gather on world for 2.3 s": what the rank's communicators said it waits in, as failure
// messages and the live view print it; "" when it is in no collective.
std::string collectiveText(const RankStatus& status, SteadyTime now);

}  // namespace ds::launcher
