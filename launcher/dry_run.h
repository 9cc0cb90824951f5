// --dry-run: the plan ds-launch would execute, printed and nothing started. Text for people; with
// --json exactly one JSON object on stdout for programs.
#pragma once

#include <array>
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

// The job's pipe x model grid (a NeoX config's pipe-parallel-size and model-parallel-size): where
// either is above 1, every rank is shown with its (pipe, data, model) coordinate, laid out as
// DeepSpeed's PipeModelDataParallelTopology lays it out.
struct GridShape {
  int pipe = 1;
  int model = 1;
  int sequence = 1;  // DeepSpeed-Ulysses' sequence_parallel_size
  bool gridded() const { return pipe > 1 || model > 1; }
};

// Rank -> (data, sequence) of a Ulysses job (consecutive ranks share each sample's positions);
// empty without one, or when the world is not whole sequence groups.
std::vector<std::array<int, 2>> sequenceCoordinates(const GridShape& grid, int worldSize);

// Rank -> (pipe, data, model) for `worldSize` ranks; empty when the grid is not gridded or the
// world is not whole replicas (the config check refuses that one).
std::vector<std::array<int, 3>> gridCoordinates(const GridShape& grid, int worldSize);

struct DryRun {
  LaunchPlan plan;
  Backend backend = Backend::Local;
  std::string coordinatorAddress;
  std::vector<LaunchCommand> commands;
  EnvList exports;
  std::optional<BatchPlan> batch;
  std::vector<std::string> notices;
  GridShape grid;
};

std::string formatDryRunText(const DryRun& dryRun);
std::string formatDryRunJson(const DryRun& dryRun);

}  // namespace ds::launcher
