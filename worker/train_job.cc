// runTrainJob: config -> Gloo communicator -> Engine, then the step loop. Ranks agree on stopping
// through a one-element all-reduce each step, so a stop request never leaves a rank in a
// collective the others have abandoned.
#include "worker/train_job.h"

#include <charconv>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <thread>

#include "common/error.h"
#include "kernels/cpu/matmul.h"
#include "runtime/comm/comms_logger.h"
#include "runtime/comm/store_barrier.h"
#include "runtime/config/job_config.h"
#include "runtime/engine/engine.h"
#include "runtime/model/mlp.h"
#include "worker/gpt_train_job.h"
#include "worker/training_monitors.h"
#include "worker/training_step.h"
#include "worker/world_communicator.h"

namespace ds::worker {
namespace {

constexpr uint64_t kTaskSeed = 2024;

}  // namespace

TrainResult runTrainJob(const TrainOptions& options, const JoinResult& join, runtime::Store& store,
                        const std::string& bindAddress, ProgressBoard& board,
                        const std::atomic<bool>& stopRequested) {
  const runtime::JobConfig job = runtime::parseJobConfig(join.configJson, join.worldSize, "config");
  const runtime::DeepSpeedConfig& config = job.deepspeed;
  // DeepSpeed's runtime check: the elasticity block this rank runs is the one the scheduler saw.
  if (const char* seen = std::getenv(runtime::kElasticityConfigVariable);
      seen && config.elasticity.enabled)
    runtime::ensureImmutableElasticConfig(seen, config.elasticity, "config");

  board.setState(RankState::Rendezvous);
  // The GPT's first matmul has a one-time cost: paid on a spare thread while the collectives
  // connect and the model and engine are built, which mostly wait on other ranks. A matmul that
  // comes first waits for it inside oneDNN; the thread is joined when this function returns.
  std::jthread matmulReady;
  if (job.gpt) matmulReady = std::jthread(kernels::prepareMatmul);
  const std::unique_ptr<runtime::Communicator> world =
      makeGroupFactory(join, store, bindAddress, config.commBackend).world();
  runtime::CommsLogger logger(config.commsLogger, join.worldSize);
  runtime::LoggingCommunicator logged(*world, logger);
  runtime::Communicator& comm =
      config.commsLogger.enabled ? static_cast<runtime::Communicator&>(logged) : *world;

  if (job.gpt) {
    TrainResult result = trainGpt(*job.gpt, config, options, join, comm, board, stopRequested);
    result.commStats = logger.summary();
    runtime::storeBarrier(store, "epoch" + std::to_string(join.epoch) + "/train/finished",
                          join.worldSize, std::chrono::minutes(5));
    return result;
  }

  if (config.flopsProfiler.enabled)
    throw Error("flops_profiler: profiles the GPT trainer (a NeoX YAML config); set "
                "\"enabled\": false for the MLP job");
  runtime::Mlp model({16, 64, 64, 4});
  runtime::TeacherTask task(model.inputDim(), model.outputDim(), kTaskSeed);
  runtime::Engine engine(model, config, comm, options.seed);
  if (!options.loadDir.empty() &&
      std::filesystem::exists(std::filesystem::path(options.loadDir) / "latest")) {
    const std::string tag = engine.loadCheckpoint(options.loadDir);
    if (join.rank == 0)
      std::printf("resumed from %s/%s at step %" PRId64 "\n", options.loadDir.c_str(), tag.c_str(),
                  engine.globalSteps());
  }
  if (join.rank == 0)
    std::printf("model: MLP 16-64-64-4, %zu parameters; ZeRO stage %d; batch %" PRId64
                " = micro %" PRId64 " x accumulation %" PRId64 " x %d ranks; collectives: %s\n",
                engine.parameterCount(), config.zero.stage, config.batch.trainBatchSize,
                config.batch.microBatchPerGpu, config.batch.gradientAccumulationSteps,
                join.worldSize, comm.backendName().c_str());

  if (config.dumpState && join.rank == 0)
    std::printf("engine state (dump_state):\n%s", engine.describeState().c_str());

  TrainingMonitors monitors(config, join.rank);

  board.setState(RankState::Training);
  const auto& batch = config.batch;
  const auto start = std::chrono::steady_clock::now();
  const StepRecord record{start, engine.globalSteps(), options.printParamHash, "step"};
  TrainResult result;
  double windowLoss = 0.0;  // mean over the steps since the last print: less noisy than one step
  int64_t windowSteps = 0;
  for (int64_t step = engine.globalSteps(); step < options.steps; ++step) {
    if (step == options.hangAtStep && join.rank == options.hangRank) {
      board.setPhase("step " + std::to_string(step + 1) + ": hanging (--hang_at_step)");
      for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
    }
    board.setPhase("step " + std::to_string(step + 1) + ": stop-vote all_reduce");
    if (everyRankStops(comm, stopRequested)) {
      checkpointOnStop(engine, options.saveDir, join.rank);
      break;
    }

    board.setPhase("step " + std::to_string(step + 1) +
                   ": forward/backward and gradient all_reduce");
    double loss = 0.0;
    for (int64_t micro = 0; micro < batch.gradientAccumulationSteps; ++micro) {
      const uint64_t first = firstSampleOf(step, micro, join.rank, join.worldSize, batch);
      loss += engine.forwardBackward(task.batch(first, batch.microBatchPerGpu));
      engine.step();
    }
    loss /= static_cast<double>(batch.gradientAccumulationSteps);
    result.steps = step + 1;
    recordStep(result, loss, engine, record, board, monitors);
    windowLoss += loss;
    ++windowSteps;
    if (result.steps == 1 || result.steps % config.stepsPerPrint == 0 ||
        result.steps == options.steps) {
      std::printf("step %" PRId64 "/%" PRId64 " loss %.6f lr %.3e grad_norm %.4f samples/s %.0f\n",
                  result.steps, options.steps, windowLoss / windowSteps, engine.lr(),
                  engine.lastGradNorm(), result.samplesPerSecond);
      windowLoss = 0.0;
      windowSteps = 0;
      if (config.wallClockBreakdown) {  // DeepSpeed's timer line, for the last step
        const runtime::StepTimes t = engine.lastStepTimes();
        std::printf(
            "time (ms) | forward: %.2f | backward: %.2f | backward_allreduce: %.2f | "
            "step: %.2f\n",
            t.forwardMs, t.backwardMs, t.allreduceMs, t.stepMs);
      }
    }
    const bool last = result.steps == options.steps;
    if (!options.saveDir.empty() &&
        (last || (options.saveInterval > 0 && result.steps % options.saveInterval == 0))) {
      board.setPhase("step " + std::to_string(result.steps) + ": saving checkpoint");
      engine.saveCheckpoint(options.saveDir, "global_step" + std::to_string(result.steps));
      if (join.rank == 0)
        std::printf("saved checkpoint %s/global_step%" PRId64 "\n", options.saveDir.c_str(),
                    result.steps);
    }
    std::fflush(stdout);
  }
  result.wallSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.commStats = logger.summary();
  // Nobody leaves (closing sockets a peer may still be reading) until everyone is done.
  runtime::storeBarrier(store, "epoch" + std::to_string(join.epoch) + "/train/finished",
                        join.worldSize, std::chrono::minutes(5));
  return result;
}

}  // namespace ds::worker
