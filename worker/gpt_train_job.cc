// trainGpt: the GPT trainer's loop. Data: the train split of an indexed dataset cut into
// seq-length + 1 token samples (runtime/data/gpt_samples.h); global sample i of step s goes to the
// rank that owns its place in the global batch (step, micro-step, rank, position), so any world
// size sees the same samples in the same order. Evaluation: eval-iters global batches of the
// validation split every eval-interval steps and at the end, averaged over ranks.
#include "worker/gpt_train_job.h"

#include <sys/resource.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/error.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/transformer_kernels.h"
#include "runtime/checkpoint/checkpoint_files.h"
#include "common/json_text.h"
#include "runtime/config/job_config.h"
#include "runtime/data/gpt_samples.h"
#include "runtime/data/indexed_dataset.h"
#include "runtime/engine/engine.h"
#include "runtime/model/gpt.h"
#include "runtime/model/sampler.h"
#include "worker/training_monitors.h"
#include "worker/training_step.h"

namespace ds::worker {
namespace {

// The micro-batch of `rank` at (step, micro) from `samples`, starting at global index `first`.
runtime::Batch makeBatch(const runtime::GptSamples& samples, uint64_t first, size_t count,
                         size_t seq) {
  runtime::Batch b;
  b.size = count;
  b.inputIds.reserve(count * seq);
  b.targetIds.reserve(count * seq);
  for (size_t i = 0; i < count; ++i) {
    const uint64_t index = (first + i) % samples.size();
    const std::vector<int32_t> tokens = samples.sample(index);
    b.inputIds.insert(b.inputIds.end(), tokens.begin(), tokens.end() - 1);
    b.targetIds.insert(b.targetIds.end(), tokens.begin() + 1, tokens.end());
    b.sampleIds.push_back(first + i);
  }
  return b;
}

int matmulThreadsFor(const JoinResult& join) {
  if (const char* omp = std::getenv("OMP_NUM_THREADS"); omp && std::atoi(omp) > 0)
    return std::atoi(omp);
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, cores / std::max(1, join.localSize));
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

}  // namespace

TrainResult trainGpt(const runtime::GptTrainConfig& gpt, const runtime::DeepSpeedConfig& config,
                     const TrainOptions& options, const JoinResult& join,
                     runtime::Communicator& comm, ProgressBoard& board,
                     const std::atomic<bool>& stopRequested) {
  kernels::setMatmulThreads(matmulThreadsFor(join));

  const std::unique_ptr<runtime::Tokenizer> tokenizer = runtime::makeJobTokenizer(gpt);
  const runtime::GptConfig modelConfig = runtime::modelConfigFor(gpt, *tokenizer);
  runtime::Gpt model(modelConfig);
  const size_t seq = static_cast<size_t>(modelConfig.seqLength);

  const runtime::IndexedDataset data(gpt.dataPath);
  const auto splits = runtime::splitDocuments(gpt.split, data.documents());
  const auto& batch = config.batch;
  const uint64_t globalBatch = static_cast<uint64_t>(batch.trainBatchSize);
  const runtime::GptSamples train(data, splits[0], seq, gpt.trainIters * globalBatch, gpt.seed);
  std::unique_ptr<runtime::GptSamples> valid;
  const uint64_t evals = static_cast<uint64_t>(gpt.trainIters / gpt.evalInterval + 1);
  if (gpt.evalIters > 0 && splits.size() > 1 && splits[1].second > splits[1].first)
    valid = std::make_unique<runtime::GptSamples>(data, splits[1], seq,
                                                  gpt.evalIters * globalBatch * evals, gpt.seed);

  const uint64_t seed = options.seed != TrainOptions{}.seed ? options.seed : gpt.seed;
  runtime::Engine engine(model, config, comm, seed);
  const std::string loadDir = !options.loadDir.empty() ? options.loadDir : gpt.load;
  const std::string saveDir = !options.saveDir.empty() ? options.saveDir : gpt.save;
  const int64_t saveInterval = options.saveInterval > 0 ? options.saveInterval : gpt.saveInterval;
  if (!loadDir.empty() && std::filesystem::exists(std::filesystem::path(loadDir) / "latest")) {
    // NeoX's finetune: the weights only, from iteration 0; no-load-optim: fresh optimizer states.
    const bool optimizerStates = !gpt.finetune && !gpt.noLoadOptim;
    const std::string tag =
        engine.loadCheckpoint(loadDir, "", {optimizerStates, /*trainingState=*/!gpt.finetune});
    if (join.rank == 0 && gpt.finetune)
      std::printf("finetune: loaded the weights of %s/%s, starting at iteration 0\n",
                  loadDir.c_str(), tag.c_str());
    else if (join.rank == 0)
      std::printf("resumed from %s/%s at iteration %" PRId64 "%s\n", loadDir.c_str(), tag.c_str(),
                  engine.globalSteps(), optimizerStates ? "" : " (no-load-optim: fresh optimizer states)");
  }
  if (join.rank == 0) {
    std::printf("model: GPT, %zu parameters (%s); ZeRO stage %d, %s; batch %" PRId64
                " = micro %" PRId64 " x accumulation %" PRId64 " x %d ranks of %zu tokens\n",
                engine.parameterCount(), modelConfig.describe().c_str(), config.zero.stage,
                dtypeName(config.precision.modelDtype), batch.trainBatchSize,
                batch.microBatchPerGpu, batch.gradientAccumulationSteps, join.worldSize, seq);
    std::printf("data: %s, %zu documents; train samples %zu (%zu epochs)%s; kernels %s, "
                "matmul threads %d per rank\n",
                gpt.dataPath.c_str(), data.documents(), train.size(), train.epochs(),
                valid ? "" : ", no validation split",
                kernels::kernelIsaName(kernels::bestKernelIsa()), kernels::matmulThreads());
  }
  if (!saveDir.empty() && join.rank == 0) {
    // What ds-generate (and a human) needs to rebuild the model from these checkpoints.
    std::filesystem::create_directories(saveDir);
    const auto shipped = ds::parseJsonText(join.configJson, "the job's config",
                                                {runtime::kMaxShippedConfigDepth});
    runtime::writeTextAtomically(saveDir + "/neox_config.json", shipped.at("neox").dump(2) + "\n");
  }
  if (config.dumpState && join.rank == 0)
    std::printf("engine state (dump_state):\n%s", engine.describeState().c_str());
  TrainingMonitors monitors(config, join.rank);

  uint64_t evalRound = 0;
  auto evaluate = [&](int64_t iteration) {
    if (!valid) return;
    board.setPhase("iteration " + std::to_string(iteration) + ": evaluation");
    double sum = 0.0;
    const uint64_t base = evalRound++ * static_cast<uint64_t>(gpt.evalIters) * globalBatch;
    const uint64_t perRank = globalBatch / static_cast<uint64_t>(join.worldSize);
    for (int64_t i = 0; i < gpt.evalIters; ++i) {
      const uint64_t first = base + static_cast<uint64_t>(i) * globalBatch +
                             static_cast<uint64_t>(join.rank) * perRank;
      sum += engine.evaluate(makeBatch(*valid, first, perRank, seq));
    }
    float mean[1] = {static_cast<float>(sum / static_cast<double>(gpt.evalIters))};
    comm.allReduce(mean, 1);
    mean[0] /= static_cast<float>(join.worldSize);
    if (join.rank == 0) {
      std::printf("validation at iteration %" PRId64 " | lm_loss %.6f | ppl %.3f\n", iteration,
                  mean[0], std::exp(static_cast<double>(mean[0])));
      monitors.write({{"validation/lm_loss", mean[0], engine.globalSamples()}});
    }
  };

  board.setState(RankState::Training);
  // As GPT-NeoX: the first evaluation comes after eval-interval iterations, none before the first
  // step (it would delay every start for a figure the first iteration line gives too).
  const auto start = std::chrono::steady_clock::now();
  const StepRecord record{start, engine.globalSteps(), options.printParamHash, "iteration"};
  TrainResult result;
  double windowLoss = 0.0;
  int64_t windowSteps = 0;
  for (int64_t step = engine.globalSteps(); step < gpt.trainIters; ++step) {
    board.setPhase("iteration " + std::to_string(step + 1) + ": stop-vote all_reduce");
    if (everyRankStops(comm, stopRequested)) {
      checkpointOnStop(engine, saveDir, join.rank);
      break;
    }
    board.setPhase("iteration " + std::to_string(step + 1) + ": forward/backward");
    const bool profiling = config.flopsProfiler.enabled && step == config.flopsProfiler.profileStep;
    double loss = 0.0;
    for (int64_t micro = 0; micro < batch.gradientAccumulationSteps; ++micro) {
      model.setProfiling(profiling && micro == 0);  // DeepSpeed profiles one micro-batch
      const uint64_t first = firstSampleOf(step, micro, join.rank, join.worldSize, batch);
      loss += engine.forwardBackward(
          makeBatch(train, first, static_cast<size_t>(batch.microBatchPerGpu), seq));
      engine.step();
    }
    loss /= static_cast<double>(batch.gradientAccumulationSteps);
    if (profiling) {
      model.setProfiling(false);
      printFlopsProfile(model, engine, config, join, seq, step);
    }
    result.steps = step + 1;
    recordStep(result, loss, engine, record, board, monitors);
    windowLoss += loss;
    ++windowSteps;
    if (result.steps == 1 || result.steps % gpt.logInterval == 0 || result.steps == gpt.trainIters) {
      if (join.rank == 0)
        std::printf("iteration %" PRId64 "/%" PRId64 " | lm_loss %.6f | lr %.3e | grad_norm %.4f | "
                    "tokens/s %.0f\n",
                    result.steps, gpt.trainIters, windowLoss / windowSteps, engine.lr(),
                    engine.lastGradNorm(), result.samplesPerSecond * static_cast<double>(seq));
      windowLoss = 0.0;
      windowSteps = 0;
    }
    if (result.steps % gpt.evalInterval == 0 && result.steps != gpt.trainIters)
      evaluate(result.steps);
    const bool last = result.steps == gpt.trainIters;
    const bool exiting = gpt.exitInterval > 0 && result.steps % gpt.exitInterval == 0;
    if (!saveDir.empty() &&
        (last || exiting || (saveInterval > 0 && result.steps % saveInterval == 0))) {
      board.setPhase("iteration " + std::to_string(result.steps) + ": saving checkpoint");
      engine.saveCheckpoint(saveDir, "global_step" + std::to_string(result.steps));
      if (join.rank == 0)
        std::printf("saved checkpoint %s/global_step%" PRId64 "\n", saveDir.c_str(), result.steps);
    }
    std::fflush(stdout);
    if (gpt.exitInterval > 0 && result.steps % gpt.exitInterval == 0 && !last) {
      if (join.rank == 0)
        std::printf("exit-interval: stopping after iteration %" PRId64 "\n", result.steps);
      break;
    }
  }
  if (result.steps == gpt.trainIters) evaluate(result.steps);

  // A sample of what the model learned, from the start of a validation (or training) sample.
  const std::vector<float> params = engine.fullParameters();  // collective at stage 3
  if (join.rank == 0) {
    const runtime::GptSamples& source = valid ? *valid : train;
    std::vector<int32_t> prompt = source.sample(0);
    prompt.resize(std::min<size_t>(prompt.size(), 32));
    runtime::SamplingOptions sampling;
    sampling.maxNewTokens = 160;
    sampling.temperature = 0.8;
    sampling.topK = 40;
    sampling.seed = gpt.seed;
    const auto generated = runtime::generateTokens(model, params.data(), prompt, sampling);
    std::printf("sample (prompt | generated):\n%s|%s\n", tokenizer->decode(prompt).c_str(),
                tokenizer->decode(generated).c_str());
  }
  // Where this rank's memory went (rank logs: every rank's line).
  const runtime::MemoryUsage m = engine.memory();
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  constexpr double kMiB = 1024.0 * 1024.0;
  const bool swapped = engine.optimizerSwapBytes() > 0;
  std::printf("memory: peak RSS %.1f MiB; model states %.1f MiB (parameters %.1f, gradients %.1f, "
              "master %.1f, optimizer %.1f%s); buffers %.1f MiB; activations %.1f MiB at most\n",
              static_cast<double>(usage.ru_maxrss) / 1024.0, m.modelState() / kMiB,
              m.parameters / kMiB, m.gradients / kMiB, m.masterWeights / kMiB,
              m.optimizerStates / kMiB, swapped ? ", these two in an NVMe swap file" : "",
              m.buffers / kMiB, model.peakActivationBytes() / kMiB);
  result.wallSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fflush(stdout);
  return result;
}

}  // namespace ds::worker
