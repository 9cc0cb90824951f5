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
#include "runtime/train/training_loop.h"
#include "worker/coordinator_client.h"
#include "worker/progress_board.h"

namespace ds::worker {

// The loop settings the train job's own options give, for every built-in trainer: the steps, the
// checkpoints, the test-only hang and the parameter hash lines. A trainer then sets its cadences.
runtime::LoopSettings loopSettingsOf(const TrainOptions& options);

runtime::TrainResult runTrainJob(const TrainOptions& options, const JoinResult& join,
                                 runtime::Store& store, const std::string& bindAddress,
                                 ProgressBoard& board, const std::atomic<bool>& stopRequested);

}  // namespace ds::worker
