// --elastic_training: the job as memberships one after another, each with the next epoch, on the
// largest prefix of the nodes alive (within --min/--max_elastic_nodes) whose world size the
// elasticity block accepts. It drops a failed node, takes nodes offered by `ds-worker --join` and
// shrinks on SIGUSR2; each new membership restarts every rank from the latest checkpoint. Starting
// and watching one membership's processes is membership_steps.h's and the supervisor's.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "launcher/coordinator.h"
#include "launcher/job_planning.h"
#include "launcher/job_supervisor.h"

namespace ds::launcher {

class ElasticController {
 public:
  // `options`: the coordinator's for every membership (its ranks, epoch and offer policy are set
  // per membership). `logs`: where the ranks' logs are, for messages.
  ElasticController(JobPlan& plan, const LaunchOptions& flags, CoordinatorOptions options,
                    std::string logs);

  // Runs memberships until the job ends; returns ds-launch's exit status.
  int run();

 private:
  // One membership change, for the live messages and the final table.
  struct Rescale {
    double atSeconds = 0;            // since the job started
    int oldWorld = 0, newWorld = 0;  // ranks
    std::string cause;
    int64_t failedAtStep = 0, resumedFromStep = 0;
    double restartSeconds = 0;  // from the failure to the new membership's processes started
    double resumeSeconds = -1;  // ... to its first step past the checkpoint resumed; -1: not yet
    std::string batchPlan;      // the new membership's micro x accumulation x ranks
  };

  // Runs the membership of `epoch`. Returns the job's exit status when the job ends with it,
  // nullopt when the next membership follows.
  std::optional<int> runMembership(uint64_t epoch);
  // Whether a node offered while `nodes` run is taken: "" or why not.
  std::string judgeOffer(const Resources& nodes, const std::string& host, int slots) const;
  // Polled by the supervisor: notes the resume time, and stops the membership for a joined node.
  std::string stopReason(Coordinator& coordinator, const LaunchPlan& plan,
                         std::optional<int64_t>& checkpointWhenOffered);
  // Opens a row of the rescale table; the next membership completes it.
  void beginRescale(int oldWorld, const std::string& cause, int64_t reached);
  void completeRescale(const LaunchPlan& plan, const runtime::BatchConfig& batch);
  std::string rescaleTable() const;

  JobPlan& plan_;
  const LaunchOptions& flags_;
  CoordinatorOptions options_;
  const std::string logs_;
  const std::string& checkpoints_;  // the plan's elastic checkpoint directory
  Resources alive_;
  const int minNodes_, maxNodes_;
  std::vector<Rescale> rescales_;
  const std::chrono::steady_clock::time_point jobStart_ = std::chrono::steady_clock::now();
  std::optional<std::chrono::steady_clock::time_point> failedAt_;
  int restarts_ = 0;
};

}  // namespace ds::launcher
