// The built-in `train` job: data-parallel training of the MLP on the synthetic teacher task with
// the runtime Engine, collectives over Gloo bootstrapped through the coordinator's store.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "contract/job_args.h"
#include "runtime/comm/store.h"
#include "runtime/train/train_result.h"
#include "worker/coordinator_client.h"
#include "worker/progress_board.h"

namespace ds::worker {

runtime::TrainResult runTrainJob(const TrainOptions& options, const JoinResult& join,
                                 runtime::Store& store, const std::string& bindAddress,
                                 ProgressBoard& board, const std::atomic<bool>& stopRequested);

}  // namespace ds::worker
