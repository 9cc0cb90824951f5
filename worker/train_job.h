// The built-in `train` job: data-parallel training of the MLP on the synthetic teacher task with
// the runtime Engine, collectives over Gloo bootstrapped through the coordinator's store.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/comm/comm_stat.h"
#include "runtime/comm/store.h"
#include "worker/coordinator_client.h"
#include "worker/progress_board.h"

namespace ds::worker {

struct TrainOptions {
  int64_t steps = 200;
  uint64_t seed = 1234;
  bool printParamHash = false;  // one "param_hash" line per step, for replica-consistency checks
  // Fault injection for stall detection: this rank stops making progress (but keeps
  // heartbeating) when it reaches this step.
  int64_t hangAtStep = -1;
  int hangRank = 0;
  // Checkpoints: resume from loadDir/latest when it exists; save to saveDir every saveInterval
  // steps (0: only at the end) under the tag "global_stepN", as DeepSpeed names them.
  std::string loadDir;
  std::string saveDir;
  int64_t saveInterval = 0;
};

// Parses the job's arguments ("train --config F --steps N ..."); throws ds::Error on bad input.
TrainOptions parseTrainOptions(const std::vector<std::string>& jobArgs);

struct TrainResult {
  int64_t steps = 0;
  double lastLoss = 0.0;
  double wallSeconds = 0.0;
  double samplesPerSecond = 0.0;
  std::vector<runtime::CommStat> commStats;  // comms_logger summary (empty when disabled)
};

TrainResult runTrainJob(const TrainOptions& options, const JoinResult& join, runtime::Store& store,
                        const std::string& bindAddress, ProgressBoard& board,
                        const std::atomic<bool>& stopRequested);

}  // namespace ds::worker
