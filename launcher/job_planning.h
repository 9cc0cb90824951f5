// Planning a ds-launch job, everything decided before anything starts: the resources in
// DeepSpeed's order, the rank plan, the backend, the job's arguments and config, and the inputs of
// every launch command. Invalid input of any kind is a ds::Error here, so nothing is left half
// started by it.
#pragma once

#include "runtime/config/batch_size.h"

#include <optional>
#include <string>
#include <vector>

#include "contract/job_args.h"
#include "launcher/backend.h"
#include "launcher/dry_run.h"
#include "launcher/launch_options.h"
#include "launcher/launch_plan.h"

namespace ds::launcher {

struct JobPlan {
  JobSpec job;
  Resources pool;  // the whole hostfile (MPI and Slurm runners use it, as DeepSpeed's do)
  LaunchPlan plan;
  Backend backend = Backend::Local;
  std::string configJson;  // the DeepSpeed config text shipped to workers ("" without one)
  std::optional<BatchPlan> batch;
  GridShape grid;                    // a NeoX config's pipe x model (1 x 1 otherwise)
  std::vector<std::string> notices;  // printed before the job starts
  BackendRequest request;            // all but the coordinator's address
  std::string elasticCheckpointDir;  // --elastic_training: where every membership saves and loads
  // DEEPSPEED_ELASTICITY_CONFIG for every rank when the config enables elasticity ("" otherwise):
  // the value inherited from a scheduler above ds-launch, else the config's elasticity block.
  std::string elasticityConfig;
};

// The largest prefix of `nodes` (between minNodes and maxNodes of them) whose world size the
// job's config accepts (an elasticity block restricts it), with that world's batch; no plan and
// the first refusal's reason when none is accepted.
struct ValidWorld {
  std::optional<LaunchPlan> plan;
  runtime::BatchConfig batch{};
  std::string why;
};
ValidWorld largestValidWorld(const Resources& nodes, int minNodes, int maxNodes,
                             const std::string& configJson);

// Fills the defaults of `flags` it decides (master address, log directory) and plans the job.
JobPlan planJob(CommandLine& line);

// --dry-run: prints the plan (text, or one JSON object with --json); returns the exit status.
int printDryRun(JobPlan& plan, const LaunchOptions& flags);

}  // namespace ds::launcher
