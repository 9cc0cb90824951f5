// The rules of decideFailure, in the order superviseJob has always applied them: per rank (exits,
// reports, lost streams, joins, heartbeats, stalls), then runners, then the pending secondary,
// then an interruption. The first root cause wins; a secondary failure waits for one.
#include "launcher/failure_policy.h"

#include <cstdio>
#include <cstring>

namespace ds::launcher {
namespace {

std::string signalName(int signal) {
  const char* name = sigabbrev_np(signal);
  return std::to_string(signal) + (name ? std::string(" (SIG") + name + ")" : "");
}

std::string ms(std::chrono::milliseconds d) { return std::to_string(d.count()) + " ms"; }

// Collects the decision as rules fire: a root cause ends the evaluation, a secondary failure is
// kept (the first one only) while the other rules still look for a root cause.
class Verdict {
 public:
  Verdict(const JobEvidence& evidence, SteadyTime now)
      : evidence_(evidence), now_(now), pending_(evidence.pending) {}

  bool failed() const { return failure_.has_value(); }
  bool hasPending() const { return pending_.has_value(); }
  void rootCause(size_t rank, const std::string& cause, int exitStatus) {
    if (!failed()) failure_ = blame(rank, cause, exitStatus);
  }
  void secondary(size_t rank, const std::string& cause, int exitStatus) {
    if (!failed() && !pending_) pending_ = blame(rank, cause, exitStatus);
  }
  void fail(JobFailure failure) {
    if (!failed()) failure_ = std::move(failure);
  }
  FailureDecision decision() const {
    if (failure_) return {failure_, std::nullopt};
    return {std::nullopt, pending_};
  }
  const std::optional<JobFailure>& pending() const { return pending_; }

 private:
  JobFailure blame(size_t rank, const std::string& cause, int exitStatus) const {
    return {static_cast<int>(rank),
            "rank " + std::to_string(rank) + " (host " + evidence_.ranks[rank].host + ") " + cause,
            exitStatus, now_};
  }
  const JobEvidence& evidence_;
  SteadyTime now_;
  std::optional<JobFailure> failure_;
  std::optional<JobFailure> pending_;
};

std::string describeExit(const RankExit& exit) {
  if (exit.signal) return "killed by signal " + signalName(*exit.signal);
  return "exited with status " + std::to_string(exit.exitCode.value_or(0));
}

// Its stream broke with no report: the process died somewhere we cannot waitpid. When several
// broke, the first one is the cause.
size_t firstLost(const JobEvidence& e, size_t r) {
  size_t first = r;
  for (size_t other = 0; other < e.health.size(); ++other)
    if (e.health[other].lost && !e.health[other].report && !e.exits[other].ownProcess &&
        e.health[other].lostAt < e.health[first].lostAt)
      first = other;
  return first;
}

// A rank whose process hosts its node's relay takes the node's heartbeats with it when it stops:
// among the silent ranks, the blame is the relay host's.
size_t silentBlame(const JobEvidence& e, size_t r, SteadyTime now) {
  size_t blamed = r;
  for (size_t other = 0; other < e.health.size(); ++other)
    if (e.health[other].hostsRelay && !e.health[other].report &&
        now - e.health[other].lastHeartbeat > e.timeouts.heartbeat)
      blamed = other;
  return blamed;
}

// Ranks in a collective with a stuck peer stall too: every stalled rank is listed with what it
// does, so the one that is not waiting on the others stands out. Peers stop a heartbeat or so
// after the stuck rank, so those past half the timeout count too. The blame goes to the first
// stalled rank that is not in a collective, as its communicators report it (they all stop within
// a heartbeat of each other, so "first noticed" would be arbitrary).
void blameStall(const JobEvidence& e, size_t r, SteadyTime now, Verdict& verdict) {
  std::string listed;
  size_t blamed = r;
  bool blamedOutsideCollective = false;
  for (size_t other = 0; other < e.health.size(); ++other) {
    const RankStatus& status = e.health[other];
    if (!status.joined || now - status.lastProgress <= e.timeouts.stall / 2) continue;
    listed += "\n  rank " + std::to_string(other) + " (" + e.ranks[other].host + ") step " +
              std::to_string(status.progress.step) + ": " + status.progress.phase +
              collectiveText(status, now);
    if (!blamedOutsideCollective && !status.progress.collective) {
      blamed = other;
      blamedOutsideCollective = true;
    }
  }
  verdict.rootCause(blamed,
                    "stalled: step " + std::to_string(e.health[blamed].progress.step) +
                        " has not advanced for " + ms(e.timeouts.stall) +
                        " while still heartbeating; stalled ranks:" + listed,
                    1);
}

void checkRanks(const JobEvidence& e, SteadyTime now, Verdict& verdict) {
  for (size_t r = 0; r < e.health.size() && !verdict.failed(); ++r) {
    const RankExit& exit = e.exits[r];
    const RankStatus& status = e.health[r];
    if (exit.signal) {
      verdict.rootCause(r, describeExit(exit), 128 + *exit.signal);
    } else if (exit.exitCode && *exit.exitCode != 0) {
      verdict.secondary(r, describeExit(exit) + (status.report ? ": " + status.report->error : ""),
                        *exit.exitCode);
    } else if (status.report && status.report->exitStatus != 0) {
      verdict.secondary(r, "failed: " + status.report->error, status.report->exitStatus);
    } else if (exit.exitCode || status.report) {
      continue;  // finished
    } else if (status.lost && !exit.ownProcess) {
      verdict.rootCause(firstLost(e, r),
                        "lost its connection to the coordinator without reporting (its process "
                        "died)",
                        1);
    } else if (!status.joined) {
      if (now - e.started > e.timeouts.join)
        verdict.rootCause(r, "did not join the coordinator within " + ms(e.timeouts.join), 1);
    } else if (now - status.lastHeartbeat > e.timeouts.heartbeat) {
      const size_t blamed = silentBlame(e, r, now);
      const RankStatus& silent = e.health[blamed];
      verdict.rootCause(blamed,
                        "stopped heartbeating (no heartbeat for " + ms(e.timeouts.heartbeat) +
                            ", at step " + std::to_string(silent.progress.step) + ", state " +
                            rankStateName(silent.progress.state) +
                            ", phase: " + silent.progress.phase + collectiveText(silent, now) + ")",
                        1);
    } else if (e.timeouts.stall.count() > 0 && status.progress.step > 0 &&
               now - status.lastProgress > e.timeouts.stall) {
      blameStall(e, r, now, verdict);
    }
  }
}

// A runner that ended while some of its ranks never reported.
void checkRunners(const JobEvidence& e, SteadyTime now, Verdict& verdict) {
  for (size_t p = 0; p < e.runners.size() && !verdict.failed(); ++p) {
    const RunnerExit& runner = e.runners[p];
    if (!runner.exited) continue;
    for (int r : runner.ranks) {
      if (e.health[r].report) continue;
      if (runner.status != 0)
        verdict.secondary(r,
                          "stopped: " + runner.label + " exited with status " +
                              std::to_string(runner.status) +
                              (runner.signal ? " (signal " + signalName(*runner.signal) + ")" : ""),
                          runner.status);
      else if (now - runner.exitedAt > kReportGrace)
        verdict.rootCause(r, "ended without reporting (" + runner.label + " exited 0)", 1);
      if (verdict.failed() || verdict.hasPending()) break;
    }
  }
}

}  // namespace

std::string collectiveText(const RankStatus& status, SteadyTime now) {
  if (!status.progress.collective) return "";
  char waited[32];
  std::snprintf(waited, sizeof(waited), "%.1f s",
                std::chrono::duration<double>(now - status.progress.collective->since).count());
  const std::string& group = status.progress.collective->group;
  return std::string(", in ") + collectiveOpName(status.progress.collective->op) +
         (group.empty() ? "" : " on " + group) + " for " + waited;
}


FailureDecision decideFailure(const JobEvidence& evidence, SteadyTime now) {
  Verdict verdict(evidence, now);
  if (evidence.ended) {
    if (evidence.pending) verdict.fail(*evidence.pending);
    return verdict.decision();
  }
  checkRanks(evidence, now, verdict);
  checkRunners(evidence, now, verdict);
  if (verdict.pending() && now - verdict.pending()->seen >= kBlameGrace)
    verdict.fail(*verdict.pending());
  if (evidence.terminationSignal != 0) {
    const char* name = sigabbrev_np(evidence.terminationSignal);
    verdict.fail({std::nullopt, std::string("interrupted by SIG") + (name ? name : "?"),
                  128 + evidence.terminationSignal, now});
  }
  return verdict.decision();
}

}  // namespace ds::launcher
