// ElasticController: one membership after another until the job ends. A failed node is dropped and
// every rank restarts from the latest checkpoint (resharded by the loader); see docs/elasticity.md
// for why survivors restart as processes.
#include "launcher/elastic_controller.h"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <limits>
#include <sstream>

#include "common/error.h"
#include "launcher/membership_steps.h"
#include "runtime/checkpoint/checkpoint_files.h"
#include "runtime/config/job_config.h"

namespace ds::launcher {
namespace {

constexpr int kNoValidWorld = 3;

// The checkpoint step the next membership starts from ("global_stepN" in DIR/latest), 0 if none.
int64_t latestCheckpointStep(const std::string& dir) {
  try {
    const std::string tag = runtime::readLatestTag(dir);
    return tag.rfind("global_step", 0) == 0 ? std::stoll(tag.substr(11)) : 0;
  } catch (const std::exception&) {  // no checkpoint yet, or a tag of another form
    return 0;
  }
}

// A node offered by `ds-worker --join`, as the launcher's resources (slots 0..N-1).
NodeResources nodeOf(const NodeOffer& offer) {
  NodeResources node{offer.host, {}};
  for (int s = 0; s < offer.slots; ++s) node.slots.push_back(s);
  return node;
}

double secondsSince(std::chrono::steady_clock::time_point then) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - then).count();
}

}  // namespace

ElasticController::ElasticController(JobPlan& plan, const LaunchOptions& flags,
                                     CoordinatorOptions options, std::string logs)
    : plan_(plan),
      flags_(flags),
      options_(std::move(options)),
      logs_(std::move(logs)),
      checkpoints_(plan.elasticCheckpointDir),
      alive_(plan.plan.nodes),
      minNodes_(flags.minElasticNodes > 0 ? flags.minElasticNodes : 1),
      maxNodes_(flags.maxElasticNodes > 0 ? flags.maxElasticNodes
                                          : std::numeric_limits<int>::max()) {}

int ElasticController::run() {
  installTerminationHandlers();
  installShrinkHandler();
  std::cout << "ds-launch: elastic job on " << alive_.size() << " node(s) with "
            << plan_.plan.worldSize() << " slots (" << backendName(plan_.backend) << "), logs in "
            << logs_ << std::endl;
  for (uint64_t epoch = 1;; ++epoch)
    if (const std::optional<int> status = runMembership(epoch)) return *status;
}

std::optional<int> ElasticController::runMembership(uint64_t epoch) {
  const ValidWorld world = largestValidWorld(alive_, minNodes_, maxNodes_, plan_.configJson);
  if (!world.plan) {
    std::cerr << "ds-launch: elastic: no valid world on the " << alive_.size()
              << " remaining node(s) (at least " << minNodes_ << " needed"
              << (world.why.empty() ? std::string(")") : "; " + world.why + ")") << "; stopping\n";
    if (!rescales_.empty()) std::cerr << rescaleTable();
    return kNoValidWorld;
  }
  const LaunchPlan& plan = *world.plan;
  const runtime::BatchConfig& batch = world.batch;
  plan_.plan = plan;
  plan_.request.plan = plan;
  options_.ranks = plan.ranks;
  options_.epoch = epoch;
  // A node offered by `ds-worker --join` is taken when the world with it is valid.
  options_.admitOffer = [this, nodes = plan.nodes](const std::string& host, int slots) {
    return judgeOffer(nodes, host, slots);
  };
  Coordinator coordinator(options_);
  plan_.request.coordinatorAddress = coordinator.address();
  std::cout << "ds-launch: elastic epoch " << epoch << ": " << plan.worldSize() << " ranks on "
            << plan.nodes.size() << " nodes; batch " << batch.trainBatchSize << " = micro "
            << batch.microBatchPerGpu << " x accumulation " << batch.gradientAccumulationSteps
            << " x " << plan.worldSize() << " ranks" << std::endl;
  writeRunnerHostfile(plan_);
  RankLogs rankLogs(flags_.logDir, eachRankLogDir(flags_), plan.ranks.size());
  std::vector<LaunchedProcess> processes = startProcesses(plan_.request, options_.heartbeatTimeout);
  if (failedAt_) completeRescale(plan, batch);
  SupervisorOptions supervision = supervisorOptionsFor(plan_, flags_);
  supervision.stopOnShrinkSignal = true;
  std::optional<int64_t> checkpointWhenOffered;
  supervision.stopWhen = [&] { return stopReason(coordinator, plan, checkpointWhenOffered); };
  const JobOutcome outcome =
      superviseJob(coordinator, plan.ranks, processes, rankLogs, supervision);
  // The furthest step any rank reached: heartbeats carry it once a second, so the lines the
  // ranks logged (routed here as they came) may be newer.
  int64_t reached = 0;
  for (const RankStatus& status : coordinator.snapshot())
    reached = std::max(reached, status.progress.step);
  for (const RankOutcome& r : outcome.ranks) reached = std::max(reached, r.loggedStep);
  const std::vector<NodeOffer> joined = coordinator.takeOffers();
  coordinator.shutdown();
  int64_t finished = 0;
  for (const RankOutcome& r : outcome.ranks) finished = std::max(finished, r.steps);
  // A node joined: every rank checkpointed and stopped; go on with it.
  if (outcome.failure.empty() && outcome.stoppedOnRequest && !outcome.shrinkRequested &&
      !joined.empty() && finished < plan_.job.train.steps) {
    std::string hosts;
    for (const NodeOffer& offer : joined) {
      alive_.push_back(nodeOf(offer));
      hosts += (hosts.empty() ? "" : ", ") + offer.host;
    }
    beginRescale(plan.worldSize(), "joined: " + hosts, std::max(reached, finished));
    keepMembershipLogs(outcome.logFiles, epoch);
    return std::nullopt;
  }
  // Asked to shrink (SIGUSR2): every rank checkpointed and stopped; go on without the last node.
  if (outcome.failure.empty() && outcome.shrinkRequested && finished < plan_.job.train.steps) {
    beginRescale(plan.worldSize(), "asked to shrink (SIGUSR2)", std::max(reached, finished));
    std::cerr << "ds-launch: elastic: shrinking by one node: dropping " << plan.nodes.back().host
              << "\n";
    const std::string dropped = plan.nodes.back().host;
    std::erase_if(alive_, [&](const NodeResources& node) { return node.host == dropped; });
    keepMembershipLogs(outcome.logFiles, epoch);
    return std::nullopt;
  }
  // Success, an interruption (no failed rank) or the restart budget spent: the job ends here.
  if (outcome.failure.empty() || !outcome.failedRank || restarts_ == flags_.maxRestarts) {
    if (!rescales_.empty()) std::cout << '\n' << rescaleTable();
    if (!outcome.failure.empty() && outcome.failedRank)
      std::cerr << "ds-launch: elastic: --max_restarts " << flags_.maxRestarts << " spent\n";
    return reportOutcome(outcome, coordinator.snapshot(), logs_);
  }
  ++restarts_;
  const RankOutcome& failed = outcome.ranks[*outcome.failedRank];
  // Heartbeats carry the step once a second: a checkpoint may be newer than the last one seen.
  beginRescale(plan.worldSize(), outcome.failure,
               std::max(reached, latestCheckpointStep(checkpoints_)));
  const std::vector<std::string> kept = keepMembershipLogs(outcome.logFiles, epoch);
  std::cerr << "ds-launch: elastic: " << outcome.failure << "; dropping node " << failed.host
            << " and restarting from the latest checkpoint (restart " << restarts_ << " of "
            << flags_.maxRestarts << "); epoch " << epoch << "'s logs kept, rank "
            << *outcome.failedRank << "'s in " << kept[*outcome.failedRank] << "\n";
  std::erase_if(alive_, [&](const NodeResources& node) { return node.host == failed.host; });
  for (const NodeOffer& offer : joined) alive_.push_back(nodeOf(offer));  // accepted before it
  return std::nullopt;
}

std::string ElasticController::judgeOffer(const Resources& nodes, const std::string& host,
                                          int slots) const {
  for (const NodeResources& node : alive_)
    if (node.host == host) return host + " is part of the job already";
  if (static_cast<int>(nodes.size()) >= maxNodes_)
    return "the job runs on --max_elastic_nodes " + std::to_string(maxNodes_) + " nodes already";
  Resources grown = nodes;
  grown.push_back(nodeOf({host, slots}));
  const int world = makeLaunchPlan(grown).worldSize();
  try {
    runtime::parseJobConfig(plan_.configJson, world, "config", runtime::MemoryCheck::Elsewhere);
  } catch (const Error& e) {
    return "a world of " + std::to_string(world) + " ranks is not valid for the job: " + e.what();
  }
  return "";
}

// A joined node comes in at the next checkpoint (the STOP saves one more at the step it reaches),
// or at once with --rescale_now.
std::string ElasticController::stopReason(Coordinator& coordinator, const LaunchPlan& plan,
                                          std::optional<int64_t>& checkpointWhenOffered) {
  // The time to resume: until a heartbeat shows a step past the checkpoint resumed from.
  if (!rescales_.empty() && rescales_.back().resumeSeconds < 0) {
    for (const RankStatus& status : coordinator.snapshot())
      if (status.progress.step > rescales_.back().resumedFromStep) {
        rescales_.back().resumeSeconds = secondsSince(*failedAt_);
        std::cout << "ds-launch: elastic: resumed at " << plan.worldSize() << " ranks "
                  << rescales_.back().resumeSeconds << " s after the change" << std::endl;
        break;
      }
  }
  if (!coordinator.hasOffers()) return "";
  if (flags_.rescaleNow) return "a node joins (--rescale_now)";
  const int64_t now = latestCheckpointStep(checkpoints_);
  if (!checkpointWhenOffered) checkpointWhenOffered = now;
  return now > *checkpointWhenOffered
             ? "a node joins at the checkpoint of step " + std::to_string(now)
             : "";
}

void ElasticController::beginRescale(int oldWorld, const std::string& cause, int64_t reached) {
  failedAt_ = std::chrono::steady_clock::now();
  Rescale r;
  r.atSeconds = std::chrono::duration<double>(*failedAt_ - jobStart_).count();
  r.oldWorld = oldWorld;
  r.cause = cause;
  r.failedAtStep = reached;
  rescales_.push_back(r);
}

void ElasticController::completeRescale(const LaunchPlan& plan, const runtime::BatchConfig& batch) {
  Rescale& r = rescales_.back();
  r.newWorld = plan.worldSize();
  r.resumedFromStep = latestCheckpointStep(checkpoints_);
  r.restartSeconds = secondsSince(*failedAt_);
  r.batchPlan = std::to_string(batch.microBatchPerGpu) + " x " +
                std::to_string(batch.gradientAccumulationSteps) + " x " +
                std::to_string(plan.worldSize());
}

std::string ElasticController::rescaleTable() const {
  std::ostringstream out;
  out << "rescales:\n    at s    world   failed at   resumed from   steps lost   restart s   "
         "resume s   batch plan          cause\n";
  for (const Rescale& r : rescales_) {
    char line[256];
    std::snprintf(line, sizeof line,
                  "  %6.1f  %2d -> %-3d %9lld %14lld %12lld %11.2f %10s   %-19s ", r.atSeconds,
                  r.oldWorld, r.newWorld, static_cast<long long>(r.failedAtStep),
                  static_cast<long long>(r.resumedFromStep),
                  static_cast<long long>(std::max<int64_t>(0, r.failedAtStep - r.resumedFromStep)),
                  r.restartSeconds,
                  r.resumeSeconds < 0 ? "-" : std::to_string(r.resumeSeconds).substr(0, 5).c_str(),
                  r.batchPlan.c_str());
    out << line << r.cause << '\n';
  }
  return out.str();
}

}  // namespace ds::launcher
