// Planning a ds-launch job, everything decided before anything starts: the resources in
// DeepSpeed's order, the rank plan, the backend, the job's arguments and config, and the inputs of
// every launch command. Invalid input of any kind is a ds::Error here, so nothing is left half
// started by it.
#pragma once

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
  std::vector<std::string> notices;  // printed before the job starts
  BackendRequest request;            // all but the coordinator's address
};

// Fills the defaults of `flags` it decides (master address, log directory) and plans the job.
JobPlan planJob(CommandLine& line);

// --dry-run: prints the plan (text, or one JSON object with --json); returns the exit status.
int printDryRun(JobPlan& plan, const LaunchOptions& flags);

}  // namespace ds::launcher
