// What a joined rank runs, chosen by the job's arguments: the barrier no-op, ds-comm-bench, the
// built-in trainer, or an external program. Joining, heartbeats and the report are main.cc's.
#pragma once

#include <atomic>
#include <string>

#include "contract/rank_contract.h"
#include "worker/coordinator_client.h"
#include "worker/progress_board.h"

namespace ds::worker {

// Runs the rank's job to its end and returns its report (exitStatus is the worker's exit status);
// a job that throws is reported failed, its error printed. `stopRequested`: the coordinator's
// STOP, for the trainer. `programPid`: an external program's process group while it runs, for
// the worker's abort and signal paths.
RankReport runRankJob(const JoinResult& join, CoordinatorClient& client,
                      const std::string& coordinatorAddress, ProgressBoard& board,
                      const std::atomic<bool>& stopRequested, std::atomic<int>& programPid);

}  // namespace ds::worker
