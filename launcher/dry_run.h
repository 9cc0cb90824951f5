// --dry-run: the plan ds-launch would execute, printed and nothing started. Text for people; with
// --json exactly one JSON object on stdout for programs.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "launcher/backend.h"
#include "launcher/launch_plan.h"

namespace ds::launcher {

struct BatchPlan {
  int64_t trainBatchSize = 0;
  int64_t microBatchPerGpu = 0;
  int64_t gradientAccumulationSteps = 0;
};

struct DryRun {
  LaunchPlan plan;
  Backend backend = Backend::Local;
  std::string coordinatorAddress;
  std::vector<LaunchCommand> commands;
  EnvList exports;
  std::optional<BatchPlan> batch;
  std::vector<std::string> notices;
};

std::string formatDryRunText(const DryRun& dryRun);
std::string formatDryRunJson(const DryRun& dryRun);

}  // namespace ds::launcher
