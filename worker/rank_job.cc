// Job dispatch for a rank: each kind of job, its rendezvous through the coordinator's store, and
// what its report says.
#include "worker/rank_job.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <utility>

#include "common/usable_cores.h"
#include "contract/job_args.h"
#include "kernels/cpu/kernel_threads.h"
#include "runtime/comm/store_barrier.h"
#include "worker/comm_bench_job.h"
#include "worker/coordinator_store.h"
#include "worker/exit_status.h"
#include "worker/external_program.h"
#include "worker/local_address.h"
#include "worker/train_job.h"
#include "worker/world_communicator.h"

namespace ds::worker {
namespace {

constexpr auto kProgramMasterWait = std::chrono::minutes(5);

// Where the program's torch.distributed rendezvous lives: a free port on rank 0's host, chosen by
// rank 0 and shared through the coordinator (the coordinator itself holds --master_port).
std::pair<std::string, int> programMaster(const JoinResult& join, const std::string& address,
                                          CoordinatorClient& client) {
  if (join.rank == 0) {
    const int port = freePortOn(address);
    client.kvSet("program/master", address + ":" + std::to_string(port));
    return {address, port};
  }
  const std::string value = client.kvGet("program/master", kProgramMasterWait);
  const auto colon = value.rfind(':');
  return {value.substr(0, colon), std::stoi(value.substr(colon + 1))};
}

}  // namespace

RankReport runRankJob(const JoinResult& join, CoordinatorClient& client,
                      const std::string& coordinatorAddress, ProgressBoard& board,
                      const std::atomic<bool>& stopRequested, std::atomic<int>& programPid) {
  RankReport report;
  int status = 0;
  try {
    const std::string bindAddress = localBindAddress(join.host, coordinatorAddress);
    const JobSpec job = parseJobArgs(join.jobArgs);
    if (job.kind == JobKind::Barrier) {
      // The no-op job: every rank checks in through the coordinator's store, the last one
      // releases them all. What bench_launch times (start, join, one barrier, clean exit).
      board.setState(RankState::Rendezvous);
      CoordinatorStore store(client);
      runtime::storeBarrier(store, "barrier", join.worldSize, std::chrono::minutes(5));
      if (join.rank == 0) std::printf("barrier passed by %d ranks\n", join.worldSize);
    } else if (job.kind == JobKind::CommBench) {
      const CommBenchOptions& options = job.bench;
      CoordinatorStore store(client);
      board.setState(RankState::Rendezvous);
      const std::unique_ptr<runtime::Communicator> world =
          makeGroupFactory(join, store, bindAddress, options.backend).world();
      board.setState(RankState::Training);
      board.setPhase(std::string("ds-comm-bench ") + collectiveOpName(options.op));
      const bool correct = runCommBench(options, *world);
      runtime::storeBarrier(store, "comm-bench/finished", join.worldSize, std::chrono::minutes(5));
      if (!correct) {
        status = report.exitStatus = kJobFailed;
        report.error = "ds-comm-bench --check: wrong results";
      }
    } else if (job.kind == JobKind::Train) {
      // The node's CPUs divided among its ranks, as OMP_NUM_THREADS would divide them (which
      // still wins where set): without it, every rank's CPU-Adam and products took every CPU.
      kernels::setKernelThreads(std::max(1, usableCores() / std::max(1, join.localSize)));
      CoordinatorStore store(client);
      const runtime::TrainResult result =
          runTrainJob(job.train, join, store, bindAddress, board, stopRequested);
      report.steps = result.steps;
      report.lastLoss = result.lastLoss;
      report.wallSeconds = result.wallSeconds;
      report.metrics["samples_per_second"] = result.samplesPerSecond;
      report.commStats = result.commStats;
    } else {
      const auto [masterAddr, masterPort] = programMaster(join, bindAddress, client);
      const auto programArgs = programArgv(join);
      board.setState(RankState::Training);
      board.setPhase("running " + programArgs.front());
      const auto started = std::chrono::steady_clock::now();
      status =
          runProgram(programArgs, programEnvironment(join, masterAddr, masterPort), programPid);
      report.wallSeconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      report.exitStatus = status;
      if (status != 0)
        report.error = status > 128
                           ? "the program was killed by signal " + std::to_string(status - 128)
                           : "the program exited with status " + std::to_string(status);
    }
    board.setState(status == 0 ? RankState::Finished : RankState::Failed);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "ds-worker: rank %d failed: %s\n", join.rank, e.what());
    report.exitStatus = kJobFailed;
    report.error = e.what();
    board.setState(RankState::Failed);
  }
  return report;
}

}  // namespace ds::worker
