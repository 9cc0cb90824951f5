// trainGpt: the GPT trainer around the shared step loop (runtime/train/training_loop.h). Data: the train
// split of an indexed dataset, or a weighted blend of several (worker/gpt_data.h), cut into
// seq-length + 1 token samples (runtime/data/gpt_samples.h);
// global sample i of step s goes to the data-parallel rank that owns its place in the global batch
// (step, micro-step, data rank, position), so any world size sees the same samples in the same
// order; every model slice and pipeline stage of one replica reads that replica's micro-batch.
// Evaluation: eval-iters global batches of the validation split every eval-interval steps and at
// the end, averaged over the data-parallel ranks.
#include "worker/gpt_train_job.h"

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/json_text.h"
#include "common/process_memory.h"
#include "kernels/cpu/kernel_threads.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/transformer_kernels.h"
#include "runtime/checkpoint/checkpoint_files.h"
#include "runtime/config/job_config.h"
#include "runtime/data/gpt_samples.h"
#include "runtime/engine/engine.h"
#include "runtime/model/gpt.h"
#include "runtime/model/gpt_stage_partition.h"
#include "runtime/model/sampler.h"
#include "runtime/train/autotuning_profile.h"
#include "runtime/train/step_timers.h"
#include "runtime/train/training_loop.h"
#include "runtime/train/training_monitors.h"
#include "runtime/train/training_step.h"
#include "worker/gpt_data.h"
#include "worker/job_efficiency.h"
#include "worker/train_job.h"

namespace ds::worker {
namespace {

// The micro-batch of `rank` at (step, micro) from `samples`, starting at global index `first`.
runtime::Batch makeBatch(const runtime::TokenSamples& samples, uint64_t first, size_t count,
                         size_t seq) {
  runtime::Batch b;
  b.size = count;
  b.inputIds.reserve(count * seq);
  b.targetIds.reserve(count * seq);
  for (size_t i = 0; i < count; ++i) {
    const uint64_t index = (first + i) % samples.size();
    const std::vector<int32_t> tokens = samples.sample(index);
    b.inputIds.insert(b.inputIds.end(), tokens.begin(), tokens.end() - 1);
    // With label datasets the targets are the labels shifted as NeoX's _get_batch shifts them
    // (labels[1:]); a negative label stays negative, which the model masks out of the loss.
    const std::vector<int32_t> targets = samples.hasLabels() ? samples.labels(index) : tokens;
    b.targetIds.insert(b.targetIds.end(), targets.begin() + 1, targets.end());
    b.sampleIds.push_back(first + i);
  }
  return b;
}

void printFlopsProfile(const runtime::Gpt& model, const runtime::Engine& engine,
                       const runtime::DeepSpeedConfig& config, const JoinResult& join, size_t seq,
                       int64_t step) {
  if (join.rank != 0) return;
  const auto& batch = config.batch;
  const runtime::StepTimes t = engine.lastStepTimes();
  const auto modules = model.profileModules(static_cast<size_t>(batch.microBatchPerGpu), seq);
  runtime::ProfileSummary s;
  s.step = step;
  s.worldSize = join.worldSize;
  s.batchPerRank = batch.microBatchPerGpu;
  s.trainBatchSize = batch.trainBatchSize;
  s.forwardSeconds = modules.front().forwardSeconds;
  const double gas = static_cast<double>(batch.gradientAccumulationSteps);
  s.backwardSeconds = t.backwardMs / gas / 1e3;
  s.stepSeconds = (t.allreduceMs + t.stepMs) / 1e3;
  const std::string text = runtime::formatFlopsProfile(modules, s, config.flopsProfiler);
  if (config.flopsProfiler.outputFile.empty()) {
    std::fputs(text.c_str(), stdout);
  } else {
    runtime::writeTextAtomically(config.flopsProfiler.outputFile, text);
    std::printf("flops_profiler: profile of step %" PRId64 " written to %s\n", step,
                config.flopsProfiler.outputFile.c_str());
  }
}

// The train split's samples, in the global order firstSampleOf sets over the data-parallel ranks.
class GptBatches final : public runtime::BatchSource {
 public:
  GptBatches(const runtime::TokenSamples& samples, const TrainingGrid& grid,
             const runtime::BatchConfig& batch, size_t seq)
      : samples_(samples), grid_(grid), batch_(batch), seq_(seq) {}
  runtime::Batch microBatch(int64_t step, int64_t micro) override {
    const uint64_t first =
        runtime::firstSampleOf(step, micro, grid_.sampleRank(), grid_.sampleRanks(), batch_);
    return makeBatch(samples_, first, static_cast<size_t>(batch_.microBatchPerGpu), seq_);
  }

 private:
  const runtime::TokenSamples& samples_;
  const TrainingGrid& grid_;
  const runtime::BatchConfig& batch_;
  size_t seq_;
};

// What the GPT trainer works on once the model and the engine are built.
struct GptJobParts {
  const runtime::GptTrainConfig& gpt;
  const runtime::DeepSpeedConfig& config;
  const JoinResult& join;
  runtime::Gpt& model;
  runtime::Engine& engine;
  const TrainingGrid& grid;
  runtime::TrainingObserver& progress;
  runtime::TrainingMonitors& monitors;
  const GptData& data;
  size_t seq;
};

// Megatron's iteration line (rank 0), the flops profile of one step, DeepSpeed's timer line
// (wall_clock_breakdown) and evaluation on the validation split.
class GptHooks final : public runtime::TrainingHooks {
 public:
  explicit GptHooks(const GptJobParts& parts) : p_(parts), valid_(parts.data.valid.get()) {}

  void beforeMicroBatch(int64_t step, int64_t micro) override {
    p_.model.setProfiling(profiling(step) && micro == 0);  // DeepSpeed profiles one micro-batch
  }
  void afterMicroBatches(int64_t step) override {
    if (profiling(step)) {
      p_.model.setProfiling(false);
      printFlopsProfile(p_.model, p_.engine, p_.config, p_.join, p_.seq, step);
    }
    if (!p_.config.wallClockBreakdown || p_.join.rank != 0) return;
    // As DeepSpeed's ZeRO optimizer: its own line after every update, from inside the step.
    const std::vector<runtime::TimerValue> timers = runtime::optimizerTimers(p_.engine.lastOptimizerTimes());
    if (!timers.empty()) std::printf("%s\n", runtime::timerLine(timers).c_str());
    // As DeepSpeed's engine: after the step, before NeoX's iteration line, on rank 0, at
    // steps_per_print (NeoX's log-interval unless the config sets it).
    if (p_.engine.globalSteps() % p_.config.stepsPerPrint == 0)
      std::printf("%s\n", runtime::timerLine(p_.engine.lastStepTimes()).c_str());
  }
  void printProgress(const runtime::LossWindow& window) override {
    const runtime::Gpt::MoeWindow moe = p_.model.takeMoeWindow();  // every rank: reset it
    if (p_.join.rank != 0) return;
    std::printf("iteration %" PRId64 "/%" PRId64 " | lm_loss %.6f | lr %.3e | grad_norm %.4f | ",
                window.steps, window.lastStep, window.meanLoss, p_.engine.lr(),
                p_.engine.lastGradNorm());
    // MoE: the routing of rank 0's passes since the last line (DeepSpeed's l_aux is local too).
    if (moe.passes > 0) {
      if (p_.gpt.model.moe.kind == runtime::MoeKind::DeepSpeed)
        std::printf("moe_loss %.6f | ", moe.moeLoss);
      std::printf("expert tokens %u-%u | dropped %zu | ", moe.minTokens, moe.maxTokens,
                  moe.dropped);
    }
    std::printf("tokens/s %.0f\n", window.samplesPerSecond * static_cast<double>(p_.seq));
  }
  // eval-iters global batches, the next ones of the validation samples, averaged over the
  // data-parallel ranks (the slices and stages of one replica evaluate the same samples).
  void evaluate(int64_t iteration) override {
    if (!valid_) return;
    p_.progress.phaseChanged("iteration " + std::to_string(iteration) + ": evaluation");
    const uint64_t globalBatch = static_cast<uint64_t>(p_.config.batch.trainBatchSize);
    const int64_t iters = p_.gpt.evalIters;
    double sum = 0.0;
    const uint64_t base = round_++ * static_cast<uint64_t>(iters) * globalBatch;
    const uint64_t perRank = globalBatch / static_cast<uint64_t>(p_.grid.sampleRanks());
    // One pass per micro-batch, as NeoX's mean of micro-batch means (with labels micro-batches
    // count different numbers of unmasked tokens, so one mean over the rank's samples would
    // differ), and so that an evaluation needs no more memory than a training micro-batch.
    const uint64_t micro = static_cast<uint64_t>(p_.config.batch.microBatchPerGpu);
    const uint64_t passSize = micro;
    const uint64_t passes = perRank / passSize;
    const bool pipelined = p_.grid.pipeSize > 1;
    for (int64_t i = 0; i < iters; ++i) {
      const uint64_t first = base + static_cast<uint64_t>(i) * globalBatch +
                             static_cast<uint64_t>(p_.grid.sampleRank()) * perRank;
      if (pipelined) {  // DeepSpeed's eval_batch: the rank's micro-batches through the stages
        sum += p_.engine.evalBatch([&](int64_t m) {
          return makeBatch(*valid_, first + static_cast<uint64_t>(m) * micro, micro, p_.seq);
        });
        continue;
      }
      for (uint64_t m = 0; m < passes; ++m)
        sum += p_.engine.evaluate(makeBatch(*valid_, first + m * passSize, passSize, p_.seq));
    }
    const double perIteration = pipelined ? 1.0 : static_cast<double>(passes);
    float mean[1] = {static_cast<float>(sum / static_cast<double>(iters) / perIteration)};
    p_.grid.data->allReduce(mean, 1);
    mean[0] /= static_cast<float>(p_.grid.dataSize);
    if (p_.join.rank == 0) {
      std::printf("validation at iteration %" PRId64 " | lm_loss %.6f | ppl %.3f\n", iteration,
                  mean[0], std::exp(static_cast<double>(mean[0])));
      p_.monitors.write({{"validation/lm_loss", mean[0], p_.engine.globalSamples()}});
    }
  }

 private:
  bool profiling(int64_t step) const {
    return p_.config.flopsProfiler.enabled && step == p_.config.flopsProfiler.profileStep;
  }

  GptJobParts p_;
  const runtime::TokenSamples* valid_;  // null: no validation data
  uint64_t round_ = 0;  // evaluations so far: each reads the next validation batches
};

// This rank's part of the model: its tensor slice and its pipeline stage's layers.
runtime::GptPlacement placementOf(const runtime::GptTrainConfig& gpt,
                                  const runtime::GptConfig& modelConfig, const TrainingGrid& grid) {
  runtime::GptPlacement placement;
  placement.modelRank = grid.modelRank;
  placement.modelSize = grid.modelSize;
  placement.model = grid.model;
  placement.sequence = grid.sequence;
  placement.experts = grid.expert;
  if (grid.pipeSize > 1) {
    const std::vector<int> bounds =
        runtime::gptStageBounds(modelConfig, grid.pipeSize, gpt.parallel.partitionMethod);
    placement.firstLayer = bounds[static_cast<size_t>(grid.pipeRank)];
    placement.endLayer = bounds[static_cast<size_t>(grid.pipeRank) + 1];
  }
  return placement;
}

// Where the job's checkpoints come from and go: the command line over the YAML.
struct CheckpointPlaces {
  std::string load, save;
  int64_t saveInterval = 0;
};

CheckpointPlaces checkpointPlaces(const runtime::GptTrainConfig& gpt, const TrainOptions& options) {
  return {!options.loadDir.empty() ? options.loadDir : gpt.load,
          !options.saveDir.empty() ? options.saveDir : gpt.save,
          options.saveInterval > 0 ? options.saveInterval : gpt.saveInterval};
}

void resumeIfSaved(runtime::Engine& engine, const runtime::GptTrainConfig& gpt,
                   const std::string& loadDir, int rank) {
  if (loadDir.empty() || !std::filesystem::exists(std::filesystem::path(loadDir) / "latest"))
    return;
  // NeoX's finetune: the weights only, from iteration 0; no-load-optim: fresh optimizer states.
  const bool optimizerStates = !gpt.finetune && !gpt.noLoadOptim;
  const std::string tag =
      engine.loadCheckpoint(loadDir, "", {optimizerStates, /*trainingState=*/!gpt.finetune});
  if (rank == 0 && gpt.finetune)
    std::printf("finetune: loaded the weights of %s/%s, starting at iteration 0\n",
                loadDir.c_str(), tag.c_str());
  else if (rank == 0)
    std::printf("resumed from %s/%s at iteration %" PRId64 "%s\n", loadDir.c_str(), tag.c_str(),
                engine.globalSteps(),
                optimizerStates ? "" : " (no-load-optim: fresh optimizer states)");
}

// Rank 0's opening lines: the model, its layout and batch, the data and the kernels.
void announce(const runtime::Engine& engine, const runtime::Gpt& model,
              const runtime::DeepSpeedConfig& config, const runtime::GptConfig& modelConfig,
              const TrainingGrid& grid, const JoinResult& join, const GptData& data) {
  const auto& batch = config.batch;
  const std::string ranks =
      grid.gridded()
          ? std::to_string(grid.dataSize) + " data-parallel replicas (pipe " +
                std::to_string(grid.pipeSize) + " x model " + std::to_string(grid.modelSize) +
                " ranks each" +
                (modelConfig.sequenceParallel && grid.modelSize > 1 ? ", sequence parallel)" : ")")
      : grid.sequenceSize > 1
          ? std::to_string(grid.sampleRanks()) + " data-parallel replicas (sequence " +
                std::to_string(grid.sequenceSize) + " ranks each, Ulysses)"
      : grid.expertSize > 1 ? std::to_string(join.worldSize) + " ranks (the experts split over " +
                                  std::to_string(grid.expertSize) + " each)"
                            : std::to_string(join.worldSize) + " ranks";
  std::printf("model: GPT, %zu parameters (%s); ZeRO stage %d, %s; batch %" PRId64
              " = micro %" PRId64 " x accumulation %" PRId64 " x %s of %zu tokens\n",
              engine.parameterCount(), modelConfig.describe().c_str(), config.zero.stage,
              dtypeName(config.precision.modelDtype), batch.trainBatchSize,
              batch.microBatchPerGpu, batch.gradientAccumulationSteps, ranks.c_str(),
              static_cast<size_t>(modelConfig.seqLength));
  const int threads = kernels::kernelThreads();
  std::printf("data: %s; kernels %s, %d thread%s per rank\n", data.description.c_str(),
              kernels::kernelIsaName(kernels::bestKernelIsa()), threads, threads == 1 ? "" : "s");
  if (const kernels::Accelerator* device = model.deviceMemory())
    std::printf("device: the model's passes on %s; the engine's states in host memory\n",
                device->deviceName().c_str());
}

// What ds-generate (and a human) needs to rebuild the model from these checkpoints.
void writeNeoxConfig(const std::string& saveDir, const JoinResult& join) {
  std::filesystem::create_directories(saveDir);
  const auto shipped =
      ds::parseJsonText(join.configJson, "the job's config", {runtime::kMaxShippedConfigDepth});
  runtime::writeTextAtomically(saveDir + "/neox_config.json", shipped.at("neox").dump(2) + "\n");
}

runtime::LoopSettings loopSettings(const runtime::GptTrainConfig& gpt, const TrainOptions& options,
                                   const CheckpointPlaces& places) {
  runtime::LoopSettings settings = loopSettingsOf(options);
  settings.lastStep = gpt.trainIters;
  settings.printInterval = gpt.logInterval;
  settings.evalInterval = gpt.evalInterval;
  settings.saveInterval = places.saveInterval;
  settings.saveDir = places.save;
  // NeoX's schedule; --save_interval on the command line replaces its periodic part (factor and
  // scale) as it replaces save-interval, while extra-save-iters still apply.
  runtime::CheckpointSchedule schedule = gpt.checkpoints;
  if (options.saveInterval > 0) schedule.factor = 0.0;
  if (schedule.periodic() || !schedule.extraSaveIters.empty())
    settings.saveAt = [schedule, last = gpt.trainIters](int64_t steps) {
      return runtime::isNeoxSaveIteration(schedule, steps, last);
    };
  settings.keepCheckpoints = gpt.checkpoints.keepLast;
  settings.exitInterval = gpt.exitInterval;
  settings.unit = "iteration";
  settings.stepPhase = "forward/backward";
  return settings;
}

runtime::TrainResult train(const GptJobParts& p, const runtime::LoopSettings& settings,
                           const std::atomic<bool>& stopRequested, ProgressBoard& board) {
  GptBatches batches(*p.data.train, p.grid, p.config.batch, p.seq);
  GptHooks hooks(p);
  // The reported loss is the mean over the data-parallel ranks, as NeoX reports it (a pipeline's
  // trainBatch already returns that mean).
  const bool pipelined = p.grid.pipeSize > 1;
  const runtime::LoopParts parts{p.engine,   *p.grid.world, {&board, &p.monitors},
                                 p.join.rank, stopRequested, pipelined ? nullptr : p.grid.data};
  if (!pipelined) return runtime::runTrainingLoop(settings, parts, batches, hooks);
  runtime::PipelineStep pipeline(p.engine, batches);
  return runtime::runTrainingLoop(settings, parts, pipeline, hooks);
}

// Why a rank cannot sample the trained model in place, or "" when it can. A pipeline would need
// activations passed stage to stage for every token, as the pipe schedule does for evaluation
// batches but not for a growing context: there ds-generate samples from a checkpoint. So does it
// with offload_param nvme, where each token's pass would read every layer again.
std::string whyNoSample(const GptJobParts& p) {
  const TrainingGrid& grid = p.grid;
  if (grid.pipeSize > 1)
    return "this rank holds pipeline stage " + std::to_string(grid.pipeRank) + " of " +
           std::to_string(grid.pipeSize) + " and model slice " + std::to_string(grid.modelRank) +
           " of " + std::to_string(grid.modelSize) +
           ", and a sample passes activations through every stage; ds-generate samples from a "
           "saved checkpoint";
  if (p.engine.parameterSwapBytes() > 0)
    return "offload_param nvme: every generated token would read the whole parameter shard from "
           "the swap file again; ds-generate samples from a saved checkpoint";
  return "";
}

// A sample of what the model learned, from the start of a validation (or training) sample, layer
// by layer through the engine (stage 3 gathers each layer when used, as in evaluation), so no rank
// holds the whole model. Every rank steps in lockstep: each pass is collective at stage 3 (and over
// the model group when sliced), so all ranks run the same passes on the same tokens; rank 0's
// logits are broadcast so every rank samples the same next token even if another rank's
// arithmetic differed, and a stop token ends every rank's loop at once.
void printSample(const GptJobParts& p, const runtime::Tokenizer& tokenizer) {
  if (const std::string why = whyNoSample(p); !why.empty()) {
    if (p.join.rank == 0) std::printf("sample: skipped (%s)\n", why.c_str());
    return;
  }
  const runtime::TokenSamples& source = p.data.valid ? *p.data.valid : *p.data.train;
  std::vector<int32_t> prompt = source.sample(0);
  prompt.resize(std::min<size_t>(prompt.size(), 32));
  runtime::SamplingOptions sampling;
  sampling.maxNewTokens = 160;
  sampling.temperature = 0.8;
  sampling.topK = 40;
  sampling.seed = p.gpt.seed;
  runtime::Communicator& world = *p.grid.world;
  const auto logits = [&](const std::vector<int32_t>& context) {
    std::vector<float> out;
    p.engine.inferencePass(
        [&](runtime::LayerAccess& access) { out = p.model.nextTokenLogits(context, access); });
    if (world.size() > 1) world.broadcast(out.data(), out.size(), 0);
    return out;
  };
  const auto generated = runtime::generateTokens(p.model, logits, prompt, sampling);
  if (p.join.rank == 0)
    std::printf("sample (prompt | generated):\n%s|%s\n", tokenizer.decode(prompt).c_str(),
                tokenizer.decode(generated).c_str());
}

// Where this rank's memory went (rank logs: every rank's line).
void printMemory(const GptJobParts& p) {
  const runtime::MemoryUsage m = p.engine.memory();
  const ProcessMemory rss = processMemory();
  constexpr double kMiB = 1024.0 * 1024.0;
  const bool swapped = p.engine.optimizerSwapBytes() > 0;
  const bool paramsSwapped = p.engine.parameterSwapBytes() > 0;
  std::printf("memory: RSS %.1f MiB, peak RSS %.1f MiB; model states %.1f MiB (parameters %.1f%s, "
              "gradients %.1f, master %.1f, optimizer %.1f%s); buffers %.1f MiB; activations "
              "%.1f MiB at most\n",
              static_cast<double>(rss.rssBytes) / kMiB,
              static_cast<double>(rss.peakRssBytes) / kMiB, m.modelState() / kMiB,
              m.parameters / kMiB,
              paramsSwapped ? " in an NVMe swap file but for their buffers" : "",
              m.gradients / kMiB, m.masterWeights / kMiB, m.optimizerStates / kMiB,
              swapped ? ", these two in an NVMe swap file" : "", m.buffers / kMiB,
              p.model.peakActivationBytes() / kMiB);
}

// Last, so that its matrices (and oneDNN's buffers for them) are not in the peak RSS printed
// before: a yardstick, not the job's memory.
void printEfficiency(const GptJobParts& p, const runtime::TrainResult& result) {
  if (result.steps <= 0 || result.samplesPerSecond <= 0) return;
  if (p.model.deviceMemory()) return;  // the yardstick is this machine's CPU sgemm peak
  const JobEfficiency efficiency =
      measureJobEfficiency(*p.grid.world, result.samplesPerSecond * static_cast<double>(p.seq),
                           p.model.trainingFlopsPerToken(p.seq));
  if (p.join.rank == 0) std::printf("%s\n", efficiencyLine(efficiency).c_str());
}

}  // namespace

runtime::TrainResult trainGpt(const runtime::GptTrainConfig& gpt,
                              const runtime::Tokenizer& tokenizer,
                              const runtime::DeepSpeedConfig& config, const TrainOptions& options,
                              const JoinResult& join, const TrainingGrid& grid,
                              ProgressBoard& board, const std::atomic<bool>& stopRequested,
                              kernels::Accelerator& accelerator) {
  kernels::setMatmulThreads(kernels::kernelThreads());
  const runtime::GptConfig modelConfig = runtime::modelConfigFor(gpt, tokenizer);
  runtime::Gpt model(modelConfig, placementOf(gpt, modelConfig, grid), accelerator);
  const size_t seq = static_cast<size_t>(modelConfig.seqLength);
  const GptData data =
      openGptData(gpt, seq, static_cast<uint64_t>(config.batch.trainBatchSize));

  const uint64_t seed = options.seed != TrainOptions{}.seed ? options.seed : gpt.seed;
  runtime::Engine engine(model, config, *grid.data, seed, grid.parallelGroups());
  const bool profiling = runtime::profilingForAutotuner(config);
  // An autotuning experiment times fresh steps: it neither resumes nor saves.
  const CheckpointPlaces places = profiling ? CheckpointPlaces{} : checkpointPlaces(gpt, options);
  resumeIfSaved(engine, gpt, places.load, join.rank);
  if (join.rank == 0) announce(engine, model, config, modelConfig, grid, join, data);
  if (!places.save.empty() && join.rank == 0) writeNeoxConfig(places.save, join);
  if (config.dumpState && join.rank == 0)
    std::printf("engine state (dump_state):\n%s", engine.describeState().c_str());
  runtime::TrainingMonitors monitors(config, join.rank);
  const GptJobParts parts{gpt, config, join, model, engine, grid, board, monitors, data, seq};

  runtime::LoopSettings settings = loopSettings(gpt, options, places);
  if (profiling) runtime::applyAutotuningProfile(config.autotuning, settings);
  runtime::TrainResult result = train(parts, settings, stopRequested, board);
  const auto trained = std::chrono::steady_clock::now();
  if (profiling) {
    printMemory(parts);
    runtime::writeAutotuningMetrics(*grid.world, config, result,
                                    model.trainingFlopsPerToken(seq) * static_cast<double>(seq));
    std::fflush(stdout);
    return result;
  }
  printSample(parts, tokenizer);
  printMemory(parts);
  printEfficiency(parts, result);
  // The job's wall time covers the sample, the memory report and the efficiency line too.
  result.wallSeconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - trained).count();
  std::fflush(stdout);
  return result;
}

}  // namespace ds::worker
