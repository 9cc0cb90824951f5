// The step loop shared by the built-in trainers. The order of its calls is part of the behaviour:
// every rank votes before a step's collectives, saves after the step is recorded, and flushes its
// lines before it may leave, so ranks never part inside a collective.
#include "runtime/train/training_loop.h"

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <thread>

#include "runtime/checkpoint/checkpoint_retention.h"
#include "runtime/train/training_step.h"

namespace ds::runtime {
namespace {

std::string phaseAt(const LoopSettings& settings, int64_t step, const std::string& what) {
  return settings.unit + " " + std::to_string(step) + ": " + what;
}

bool every(int64_t steps, int64_t interval) { return interval > 0 && steps % interval == 0; }

void tellPhase(const LoopParts& parts, const std::string& phase) {
  for (TrainingObserver* observer : parts.observers) observer->phaseChanged(phase);
}

void saveCheckpointAt(const LoopSettings& settings, const LoopParts& parts, int64_t steps) {
  tellPhase(parts, phaseAt(settings, steps, "saving checkpoint"));
  parts.engine.saveCheckpoint(settings.saveDir, "global_step" + std::to_string(steps));
  if (parts.rank == 0)
    std::printf("saved checkpoint %s/global_step%" PRId64 "\n", settings.saveDir.c_str(), steps);
}

// Rank 0 only, after saveCheckpoint returned on every rank: the new checkpoint is published and
// `latest` names it, so deleting older ones never leaves fewer than keepCheckpoints complete.
// A failed deletion costs disk, not the run: it is reported and training goes on.
void pruneCheckpoints(const LoopSettings& settings, const LoopParts& parts) {
  if (parts.rank != 0 || settings.keepCheckpoints <= 0 || settings.saveDir.empty()) return;
  try {
    for (const std::string& tag :
         deleteOldCheckpoints(settings.saveDir, settings.keepCheckpoints))
      std::printf("keep-last-n-checkpoints: deleted %s/%s\n", settings.saveDir.c_str(),
                  tag.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "warning: keep-last-n-checkpoints: %s; training goes on\n", e.what());
  }
}

}  // namespace

double AccumulatingStep::runStep(int64_t step) {
  const int64_t count = engine_.config().batch.gradientAccumulationSteps;
  double loss = 0.0;
  for (int64_t micro = 0; micro < count; ++micro) {
    hooks_.beforeMicroBatch(step, micro);
    loss += engine_.forwardBackward(source_.microBatch(step, micro));
    hooks_.afterBackward(step, micro);
    engine_.step();
  }
  return loss / static_cast<double>(count);
}

double PipelineStep::runStep(int64_t step) {
  return engine_.trainBatch([&](int64_t micro) { return source_.microBatch(step, micro); });
}

TrainResult runTrainingLoop(const LoopSettings& settings, const LoopParts& parts,
                            BatchSource& source, TrainingHooks& hooks) {
  AccumulatingStep accumulating(parts.engine, source, hooks);
  return runTrainingLoop(settings, parts, accumulating, hooks);
}

TrainResult runTrainingLoop(const LoopSettings& settings, const LoopParts& parts,
                            StepSchedule& schedule, TrainingHooks& hooks) {
  Engine& engine = parts.engine;
  for (TrainingObserver* observer : parts.observers) observer->trainingStarted();
  const auto start = std::chrono::steady_clock::now();
  const StepRecord record{start, engine.globalSteps(), settings.printParamHash, settings.unit};
  TrainResult result;
  LossWindow window{0, settings.lastStep, 0.0, 0.0};
  double windowLoss = 0.0;
  int64_t windowSteps = 0;
  // Step profileFrom ended here; a profile from step 0 starts with the loop.
  auto profileStart = start;
  if (!settings.saveDir.empty() && engine.globalSteps() == 0 && settings.saveAt &&
      settings.saveAt(0)) {
    saveCheckpointAt(settings, parts, 0);
    pruneCheckpoints(settings, parts);
  }
  for (int64_t step = engine.globalSteps(); step < settings.lastStep; ++step) {
    if (step == settings.hangAtStep && parts.rank == settings.hangRank) {
      tellPhase(parts, phaseAt(settings, step + 1, "hanging (--hang_at_step)"));
      for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
    }
    tellPhase(parts, phaseAt(settings, step + 1, "stop-vote all_reduce"));
    if (everyRankStops(parts.comm, parts.stopRequested)) {
      checkpointOnStop(engine, settings.saveDir, parts.rank);
      pruneCheckpoints(settings, parts);
      break;
    }

    tellPhase(parts, phaseAt(settings, step + 1, settings.stepPhase));
    double loss = schedule.runStep(step);
    if (parts.lossGroup && parts.lossGroup->size() > 1) {
      float mean = static_cast<float>(loss);
      parts.lossGroup->allReduce(&mean, 1, ReduceOp::Avg);
      loss = mean;
    }
    hooks.afterMicroBatches(step);
    result.steps = step + 1;
    if (result.steps == settings.profileFrom) profileStart = std::chrono::steady_clock::now();
    if (result.steps == settings.profileTo && settings.profileFrom >= 0)
      result.profiledStepSeconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - profileStart).count() /
          static_cast<double>(settings.profileTo - settings.profileFrom);
    recordStep(result, loss, engine, record, parts.observers);
    windowLoss += loss;
    ++windowSteps;
    const bool last = result.steps == settings.lastStep;
    if (result.steps == 1 || result.steps % settings.printInterval == 0 || last) {
      window.steps = result.steps;
      window.meanLoss = windowLoss / static_cast<double>(windowSteps);
      window.samplesPerSecond = result.samplesPerSecond;
      hooks.printProgress(window);
      windowLoss = 0.0;
      windowSteps = 0;
    }
    if (every(result.steps, settings.evalInterval) && !last) hooks.evaluate(result.steps);
    const bool exiting = every(result.steps, settings.exitInterval);
    if (!settings.saveDir.empty() &&
        (last || exiting || every(result.steps, settings.saveInterval) ||
         (settings.saveAt && settings.saveAt(result.steps)))) {
      saveCheckpointAt(settings, parts, result.steps);
      pruneCheckpoints(settings, parts);
    }
    std::fflush(stdout);
    if (exiting && !last) {
      if (parts.rank == 0)
        std::printf("exit-interval: stopping after %s %" PRId64 "\n", settings.unit.c_str(),
                    result.steps);
      break;
    }
  }
  // As GPT-NeoX: an evaluation at the end of training, none before the first step (it would delay
  // every start for a figure the first progress line gives too).
  if (settings.evalInterval > 0 && result.steps == settings.lastStep) hooks.evaluate(result.steps);
  result.wallSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace ds::runtime
