// runTrainJob: config -> Gloo communicator -> Engine, then the shared step loop
// (runtime/train/training_loop.h) over the teacher task's batches; the GPT job (worker/gpt_train_job.h)
// when the config is a NeoX YAML.
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
#include "common/memory_budget.h"
#include "kernels/accelerator.h"
#include "kernels/cpu/matmul.h"
#include "runtime/comm/comms_logger.h"
#include "runtime/comm/store_barrier.h"
#include "runtime/config/job_config.h"
#include "runtime/config/rank_memory_preflight.h"
#include "runtime/engine/engine.h"
#include "runtime/model/mlp.h"
#include "runtime/train/autotuning_profile.h"
#include "runtime/train/step_timers.h"
#include "runtime/train/training_loop.h"
#include "runtime/train/training_monitors.h"
#include "runtime/train/training_step.h"
#include "worker/gpt_train_job.h"
#include "worker/training_grid.h"
#include "worker/world_communicator.h"

namespace ds::worker {
namespace {

constexpr uint64_t kTaskSeed = 2024;

// The teacher task's samples, in the global order firstSampleOf sets.
class TeacherBatches final : public runtime::BatchSource {
 public:
  TeacherBatches(const runtime::TeacherTask& task, const JoinResult& join,
                 const runtime::BatchConfig& batch)
      : task_(task), join_(join), batch_(batch) {}
  runtime::Batch microBatch(int64_t step, int64_t micro) override {
    const uint64_t first = runtime::firstSampleOf(step, micro, join_.rank, join_.worldSize, batch_);
    return task_.batch(first, batch_.microBatchPerGpu);
  }

 private:
  const runtime::TeacherTask& task_;
  const JoinResult& join_;
  const runtime::BatchConfig& batch_;
};

// The MLP job's progress line, on every rank, and with wall_clock_breakdown DeepSpeed's timer line
// for the last step; its ZeRO optimizer's own line after every update, on rank 0, as DeepSpeed's
// optimizer logs it from inside its step.
class MlpHooks final : public runtime::TrainingHooks {
 public:
  MlpHooks(const runtime::Engine& engine, const runtime::DeepSpeedConfig& config, int rank)
      : engine_(engine), config_(config), rank_(rank) {}
  void afterMicroBatches(int64_t /*step*/) override {
    if (!config_.wallClockBreakdown || rank_ != 0) return;
    const std::vector<runtime::TimerValue> timers = runtime::optimizerTimers(engine_.lastOptimizerTimes());
    if (!timers.empty()) std::printf("%s\n", runtime::timerLine(timers).c_str());
  }
  void printProgress(const runtime::LossWindow& window) override {
    std::printf("step %" PRId64 "/%" PRId64 " loss %.6f lr %.3e grad_norm %.4f samples/s %.0f\n",
                window.steps, window.lastStep, window.meanLoss, engine_.lr(), engine_.lastGradNorm(),
                window.samplesPerSecond);
    if (config_.wallClockBreakdown)
      std::printf("%s\n", runtime::timerLine(engine_.lastStepTimes()).c_str());
  }

 private:
  const runtime::Engine& engine_;
  const runtime::DeepSpeedConfig& config_;
  const int rank_;
};

}  // namespace

runtime::LoopSettings loopSettingsOf(const TrainOptions& options) {
  runtime::LoopSettings settings;
  settings.lastStep = options.steps;
  settings.saveInterval = options.saveInterval;
  settings.saveDir = options.saveDir;
  settings.printParamHash = options.printParamHash;
  settings.hangAtStep = options.hangAtStep;
  settings.hangRank = options.hangRank;
  return settings;
}

runtime::TrainResult runTrainJob(const TrainOptions& options, const JoinResult& join,
                                 runtime::Store& store, const std::string& bindAddress,
                                 ProgressBoard& board, const std::atomic<bool>& stopRequested) {
  // Checked again here: this node's DS_ACCELERATOR may differ from the launcher's.
  const DeviceKind device = trainingDevice(options);
  const runtime::JobConfig job = runtime::parseJobConfig(join.configJson, join.worldSize, "config");
  runtime::checkTrainingDevice(job, device, deviceOrigin(options));
  const runtime::DeepSpeedConfig& config = job.deepspeed;
  // DeepSpeed's runtime check: the elasticity block this rank runs is the one the scheduler saw.
  runtime::checkSchedulerElasticConfig(config.elasticity, "config");
  runtime::checkBuiltInTrainer(job);

  // This node's memory, measured before the world forms: no rank of the job has built anything
  // yet (forming the world waits for every rank), so the node's ranks all see what they will share.
  const MemoryBudget node = memoryBudget();

  board.setState(RankState::Rendezvous);
  // The GPT's first matmul has a one-time cost: paid on a spare thread while the collectives
  // connect and the model and engine are built, which mostly wait on other ranks. A matmul that
  // comes first waits for it inside oneDNN; the thread is joined when this function returns.
  std::jthread matmulReady;
  if (job.gpt) matmulReady = std::jthread(kernels::prepareMatmul);
  runtime::GroupFactory factory = makeGroupFactory(join, store, bindAddress, config.commBackend);
  const std::unique_ptr<runtime::Communicator> world = factory.world();
  runtime::CommsLogger logger(config.commsLogger);
  runtime::LoggingCommunicator logged(*world, logger);
  runtime::Communicator& comm =
      config.commsLogger.enabled ? static_cast<runtime::Communicator&>(logged) : *world;

  if (job.gpt) {
    // Before any rank builds its model: the training state of the node's ranks against the
    // node's memory (ds-launch checks only nodes that are its own machine). Every rank of a
    // node gives the same verdict, and the launcher tears the job down at the first refusal.
    // Loaded once: for the memory check and for training.
    const std::unique_ptr<runtime::Tokenizer> tokenizer = runtime::makeJobTokenizer(*job.gpt);
    runtime::checkRankMemory(job, *tokenizer, join.worldSize, join.localSize, node, "config");
    // The grid's groups are made by every rank before any of them trains.
    const TrainingGridGroups groups(factory, comm, job.gpt->parallel,
                                    config.commsLogger.enabled ? &logger : nullptr, &config.zero,
                                    join.localSize);
    runtime::TrainResult result =
        trainGpt(*job.gpt, *tokenizer, config, options, join, groups.grid(), board, stopRequested,
                 kernels::jobAccelerator(device, join.localRank));
    result.commStats = logger.summary();
    runtime::storeBarrier(store, "epoch" + std::to_string(join.epoch) + "/train/finished",
                          join.worldSize, std::chrono::minutes(5));
    return result;
  }

  runtime::Mlp model(runtime::kBuiltInMlpLayers);
  runtime::TeacherTask task(model.inputDim(), model.outputDim(), kTaskSeed);
  const TrainingGridGroups groups(factory, comm, runtime::ParallelConfig{},
                                  config.commsLogger.enabled ? &logger : nullptr, &config.zero,
                                  join.localSize);
  runtime::Engine engine(model, config, comm, options.seed, groups.grid().parallelGroups());
  // An autotuning experiment times fresh steps: it neither resumes nor saves.
  const bool profiling = runtime::profilingForAutotuner(config);
  if (!profiling && !options.loadDir.empty() &&
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

  runtime::TrainingMonitors monitors(config, join.rank);
  TeacherBatches batches(task, join, config.batch);
  MlpHooks hooks(engine, config, join.rank);
  runtime::LoopSettings settings = loopSettingsOf(options);
  settings.printInterval = config.stepsPerPrint;
  settings.stepPhase = "forward/backward and gradient all_reduce";
  if (profiling) runtime::applyAutotuningProfile(config.autotuning, settings);
  runtime::TrainResult result = runtime::runTrainingLoop(
      settings, {engine, comm, {&board, &monitors}, join.rank, stopRequested}, batches, hooks);
  // A training step's flops per sample: forward and backward, 3 x 2 per weight.
  if (profiling)
    runtime::writeAutotuningMetrics(comm, config, result,
                                    6.0 * static_cast<double>(engine.parameterCount()));
  result.commStats = logger.summary();
  // Nobody leaves (closing sockets a peer may still be reading) until everyone is done.
  runtime::storeBarrier(store, "epoch" + std::to_string(join.epoch) + "/train/finished",
                        join.worldSize, std::chrono::minutes(5));
  return result;
}

}  // namespace ds::worker
