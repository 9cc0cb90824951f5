// decideFailure, rule by rule, on hand-made evidence: which rank a failure is blamed on, when a
// secondary failure waits for a root cause, and that "in a collective" is the typed field.
#include <signal.h>

#include <catch2/catch.hpp>
#include <string>

#include "launcher/failure_policy.h"

using namespace ds;
using namespace ds::launcher;
using namespace std::chrono_literals;

namespace {

// n ranks on hosts h0, h1, ..., each its own process, joined and heartbeating at t0.
struct Job {
  std::vector<RankPlacement> ranks;
  std::vector<RankStatus> health;
  std::vector<RankExit> exits;
  std::vector<RunnerExit> runners;
  FailureTimeouts timeouts{10000ms, 0ms, 60000ms};
  SteadyTime t0 = SteadyTime{} + 1h;
  int terminationSignal = 0;

  explicit Job(int n) : ranks(n), health(n), exits(n) {
    for (int r = 0; r < n; ++r) {
      ranks[r].rank = r;
      ranks[r].host = "h" + std::to_string(r);
      health[r].joined = true;
      health[r].progress.state = RankState::Training;
      health[r].progress.step = 5;
      health[r].joinedAt = health[r].lastHeartbeat = health[r].lastProgress = t0;
      exits[r].ownProcess = true;
    }
  }
  FailureDecision decide(SteadyTime now, std::optional<JobFailure> pending = {},
                         bool ended = false) const {
    const JobEvidence evidence{
        ranks, health, exits, runners, timeouts, t0, terminationSignal, std::move(pending), ended};
    return decideFailure(evidence, now);
  }
  void inCollective(int r, CollectiveOp op, std::string group = "world") {
    health[r].progress.collective = CollectiveWait{op, std::move(group), t0};
  }
  void stall(int r, std::string phase) {
    health[r].progress.phase = std::move(phase);
    health[r].lastHeartbeat = t0 + 1s;  // still heartbeating, step unchanged since t0
  }
};

RankReport report(int exitStatus, std::string error = "") {
  RankReport report;
  report.exitStatus = exitStatus;
  report.error = std::move(error);
  return report;
}

// `decision` blames no rank yet: it waits on a secondary failure of `rank` with `exitStatus` and
// `message`, for a root cause to turn up.
void requirePending(const FailureDecision& decision, int rank, int exitStatus,
                    const std::string& message) {
  REQUIRE_FALSE(decision.failure);
  REQUIRE(decision.pending);
  REQUIRE(decision.pending->rank == rank);
  REQUIRE(decision.pending->exitStatus == exitStatus);
  REQUIRE(decision.pending->message == message);
}

// `decision` is a failure blamed on `rank`; returns its message.
std::string blamedMessage(const FailureDecision& decision, int rank) {
  REQUIRE(decision.failure);
  REQUIRE(decision.failure->rank == rank);
  return decision.failure->message;
}

// Nothing is blamed at `deadline`; a millisecond later rank `rank` is, with `message`.
void requireBlamedJustAfter(const Job& job, SteadyTime deadline, int rank,
                            const std::string& message) {
  REQUIRE_FALSE(job.decide(deadline).failure);
  REQUIRE(blamedMessage(job.decide(deadline + 1ms), rank) == message);
}

}  // namespace

TEST_CASE("failure policy: a healthy job has no failure and nothing pending") {
  const Job job(4);
  const FailureDecision decision = job.decide(job.t0 + 1s);
  REQUIRE_FALSE(decision.failure);
  REQUIRE_FALSE(decision.pending);
}

TEST_CASE("failure policy: a rank killed by a signal is a root cause, blamed at once") {
  Job job(3);
  job.exits[1].signal = SIGKILL;
  const FailureDecision decision = job.decide(job.t0 + 1s);
  REQUIRE(decision.failure);
  REQUIRE(decision.failure->rank == 1);
  REQUIRE(decision.failure->exitStatus == 128 + SIGKILL);
  REQUIRE(decision.failure->message == "rank 1 (host h1) killed by signal 9 (SIGKILL)");
}

TEST_CASE("failure policy: a non-zero exit waits the blame grace for a root cause") {
  Job job(3);
  job.exits[0].exitCode = 3;
  job.health[0].report = report(3, "peer 2 closed the connection");
  const FailureDecision first = job.decide(job.t0 + 1s);
  REQUIRE_FALSE(first.failure);
  REQUIRE(first.pending);
  REQUIRE(first.pending->rank == 0);
  REQUIRE(first.pending->seen == job.t0 + 1s);

  SECTION("no root cause within the grace: the secondary failure is the job's") {
    REQUIRE_FALSE(job.decide(job.t0 + 1s + kBlameGrace - 1ms, first.pending).failure);
    const FailureDecision later = job.decide(job.t0 + 1s + kBlameGrace, first.pending);
    REQUIRE(later.failure);
    REQUIRE(later.failure->rank == 0);
    REQUIRE(later.failure->exitStatus == 3);
    REQUIRE(later.failure->message ==
            "rank 0 (host h0) exited with status 3: peer 2 closed the connection");
  }
  SECTION("a root cause found within the grace takes the blame") {
    job.exits[2].signal = SIGKILL;
    const FailureDecision later = job.decide(job.t0 + 1200ms, first.pending);
    REQUIRE(later.failure);
    REQUIRE(later.failure->rank == 2);
  }
  SECTION("the job ended: the secondary failure stands at once") {
    const FailureDecision ended = job.decide(job.t0 + 1100ms, first.pending, true);
    REQUIRE(ended.failure);
    REQUIRE(ended.failure->rank == 0);
  }
}

TEST_CASE("failure policy: a root cause in the same tick beats an earlier rank's secondary") {
  Job job(3);
  job.exits[0].exitCode = 1;
  job.exits[2].signal = SIGSEGV;
  const FailureDecision decision = job.decide(job.t0 + 1s);
  REQUIRE(decision.failure);
  REQUIRE(decision.failure->rank == 2);
  REQUIRE(decision.failure->exitStatus == 128 + SIGSEGV);
}

TEST_CASE("failure policy: a failed report is secondary, the first one is kept") {
  Job job(3);
  job.exits[1].ownProcess = job.exits[2].ownProcess = false;
  job.health[1].report = report(4, "collective timed out");
  job.health[2].report = report(5, "also timed out");
  requirePending(job.decide(job.t0 + 1s), 1, 4, "rank 1 (host h1) failed: collective timed out");
}

TEST_CASE("failure policy: finished ranks are never blamed, however old their heartbeat") {
  Job job(2);
  job.exits[0].exitCode = 0;
  job.exits[1].ownProcess = false;
  job.health[1].report = report(0);
  REQUIRE_FALSE(job.decide(job.t0 + 1h).failure);
}

TEST_CASE("failure policy: of the ranks whose stream broke unreported, the first lost is blamed") {
  Job job(4);
  for (int r : {1, 3}) {
    job.exits[r].ownProcess = false;
    job.health[r].lost = true;
  }
  job.health[1].lostAt = job.t0 + 300ms;
  job.health[3].lostAt = job.t0 + 100ms;
  const FailureDecision decision = job.decide(job.t0 + 1s);
  REQUIRE(decision.failure);
  REQUIRE(decision.failure->rank == 3);
  REQUIRE(decision.failure->exitStatus == 1);
  REQUIRE_THAT(decision.failure->message, Catch::Contains("lost its connection"));
}

TEST_CASE("failure policy: a lost stream of a rank ds-launch waits for itself is not a failure") {
  Job job(2);
  job.health[1].lost = true;  // its own process: waitpid will tell how it ended
  REQUIRE_FALSE(job.decide(job.t0 + 1s).failure);
}

TEST_CASE("failure policy: a rank that does not join within the join timeout is blamed") {
  Job job(2);
  job.timeouts.join = 5000ms;
  job.health[1].joined = false;
  job.health[1].progress.state = RankState::Waiting;
  requireBlamedJustAfter(job, job.t0 + job.timeouts.join, 1,
                         "rank 1 (host h1) did not join the coordinator within 5000 ms");
}

TEST_CASE("failure policy: a silent rank is blamed after the heartbeat timeout") {
  Job job(3);
  for (int r : {0, 2}) job.health[r].lastHeartbeat = job.t0 + 10s;
  job.health[1].progress.phase = "step 6: forward";
  requireBlamedJustAfter(
      job, job.t0 + 10s, 1,
      "rank 1 (host h1) stopped heartbeating (no heartbeat for 10000 ms, at step 5, state "
      "training, phase: step 6: forward)");
}

TEST_CASE("failure policy: a silent node is blamed on the rank whose process hosts its relay") {
  Job job(4);
  for (int r : {0, 1}) job.health[r].lastHeartbeat = job.t0 + 10s;
  job.health[3].hostsRelay = true;  // ranks 2 and 3 went silent together
  const FailureDecision decision = job.decide(job.t0 + 10s + 1ms);
  REQUIRE(decision.failure);
  REQUIRE(decision.failure->rank == 3);
}

TEST_CASE("failure policy: a silent rank's message says which collective it was in") {
  Job job(2);
  job.health[0].lastHeartbeat = job.t0 + 10s;
  job.inCollective(1, CollectiveOp::Broadcast, "ranks 0,1");
  const FailureDecision decision = job.decide(job.t0 + 10s + 500ms);
  REQUIRE(decision.failure);
  REQUIRE_THAT(decision.failure->message,
               Catch::EndsWith(", in broadcast on ranks 0,1 for 10.5 s)"));
}

TEST_CASE("failure policy: of the stalled ranks, one not in a collective is blamed") {
  Job job(2);
  job.timeouts.stall = 1000ms;
  const SteadyTime now = job.t0 + 1001ms;

  SECTION("the GPT case: both phases say forward/backward, rank 0 is in an all_gather") {
    job.stall(0, "iteration 6: forward/backward");
    job.stall(1, "iteration 6: forward/backward");
    job.inCollective(0, CollectiveOp::AllGather);
    REQUIRE(
        blamedMessage(job.decide(now), 1) ==
        "rank 1 (host h1) stalled: step 5 has not advanced for 1000 ms while still "
        "heartbeating; stalled ranks:\n"
        "  rank 0 (h0) step 5: iteration 6: forward/backward, in all_gather on world for 1.0 s\n"
        "  rank 1 (h1) step 5: iteration 6: forward/backward");
  }
  SECTION("the phase text does not count: an all_reduce phase outside any collective is blamed") {
    job.stall(0, "step 6: forward/backward and gradient all_reduce");
    job.stall(1, "step 6: hanging");
    job.inCollective(1, CollectiveOp::AllReduce);
    blamedMessage(job.decide(now), 0);
  }
  SECTION("all in collectives: the first rank past the timeout is blamed") {
    job.stall(0, "a");
    job.stall(1, "b");
    job.health[0].lastProgress = job.t0 + 300ms;  // past half the timeout only: listed
    job.inCollective(0, CollectiveOp::AllReduce);
    job.inCollective(1, CollectiveOp::AllReduce);
    REQUIRE_THAT(blamedMessage(job.decide(now), 1), Catch::Contains("rank 0 (h0) step 5: a"));
  }
  SECTION("ranks stalled less than half the timeout are neither listed nor blamed") {
    job.stall(1, "b");
    job.health[0].lastProgress = job.t0 + 600ms;
    job.inCollective(1, CollectiveOp::AllReduce);
    REQUIRE_THAT(blamedMessage(job.decide(now), 1), !Catch::Contains("rank 0 (h0)"));
  }
}

TEST_CASE("failure policy: no stall is judged when the stall timeout is off or before step 1") {
  Job job(2);
  job.stall(0, "a");
  job.stall(1, "b");
  REQUIRE_FALSE(job.decide(job.t0 + 5s).failure);  // stall timeout 0: off
  job.timeouts.stall = 1000ms;
  job.health[0].progress.step = job.health[1].progress.step = 0;
  REQUIRE_FALSE(job.decide(job.t0 + 5s).failure);
}

TEST_CASE("failure policy: a runner that ended with its ranks unreported") {
  Job job(4);
  for (int r : {2, 3}) job.exits[r].ownProcess = false;
  RunnerExit runner;
  runner.ranks = {2, 3};
  runner.label = "ssh h2";
  runner.exited = true;
  runner.exitedAt = job.t0;
  job.health[2].report = report(0);

  SECTION("with an error: a secondary failure of its first unreported rank") {
    runner.status = 255;
    job.runners = {runner};
    requirePending(job.decide(job.t0 + 100ms), 3, 255,
                   "rank 3 (host h3) stopped: ssh h2 exited with status 255");
  }
  SECTION("killed: the signal is named") {
    runner.status = 128 + SIGKILL;
    runner.signal = SIGKILL;
    job.runners = {runner};
    REQUIRE_THAT(job.decide(job.t0 + 100ms).pending->message,
                 Catch::EndsWith("(signal 9 (SIGKILL))"));
  }
  SECTION("cleanly: the rank is blamed once its report had time to arrive") {
    job.runners = {runner};
    requireBlamedJustAfter(job, job.t0 + kReportGrace, 3,
                           "rank 3 (host h3) ended without reporting (ssh h2 exited 0)");
  }
}

TEST_CASE("failure policy: an interrupted launch fails without blaming a rank") {
  Job job(2);
  job.terminationSignal = SIGTERM;
  const FailureDecision decision = job.decide(job.t0 + 1s);
  REQUIRE(decision.failure);
  REQUIRE_FALSE(decision.failure->rank);
  REQUIRE(decision.failure->message == "interrupted by SIGTERM");
  REQUIRE(decision.failure->exitStatus == 128 + SIGTERM);

  SECTION("a rank's root cause found in the same tick comes first") {
    job.exits[1].signal = SIGKILL;
    REQUIRE(job.decide(job.t0 + 1s).failure->rank == 1);
  }
}
