// The built-in `train` job: data-parallel training of the MLP on the synthetic teacher task with
// the runtime Engine, collectives over Gloo bootstrapped through the coordinator's store.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "contract/job_args.h"
#include "common/comm_stat.h"
#include "runtime/comm/store.h"
#include "worker/coordinator_client.h"
#include "worker/progress_board.h"

namespace ds::worker {

struct TrainResult {
  int64_t steps = 0;
  double lastLoss = 0.0;
  double wallSeconds = 0.0;
  double samplesPerSecond = 0.0;
  std::vector<ds::CommStat> commStats;  // comms_logger summary (empty when disabled)
};

TrainResult runTrainJob(const TrainOptions& options, const JoinResult& join, runtime::Store& store,
                        const std::string& bindAddress, ProgressBoard& board,
                        const std::atomic<bool>& stopRequested);

}  // namespace ds::worker
