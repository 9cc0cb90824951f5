#include "runtime/train/training_step.h"

#include <cinttypes>
#include <cstdio>
#include <filesystem>

namespace ds::runtime {

bool everyRankStops(Communicator& comm, const std::atomic<bool>& stopRequested) {
  float vote[1] = {stopRequested.load() ? 1.0f : 0.0f};
  comm.allReduce(vote, 1);
  return vote[0] > 0.0f;
}

void checkpointOnStop(Engine& engine, const std::string& saveDir, int rank) {
  if (saveDir.empty() || engine.globalSteps() == 0) return;
  const std::string tag = "global_step" + std::to_string(engine.globalSteps());
  // Every rank sees the same directory, so they agree on whether to save.
  if (!std::filesystem::exists(std::filesystem::path(saveDir) / tag))
    engine.saveCheckpoint(saveDir, tag);
  if (rank == 0) std::printf("stopped: checkpoint %s/%s\n", saveDir.c_str(), tag.c_str());
}

void recordStep(TrainResult& result, double loss, Engine& engine, const StepRecord& record,
                const std::vector<TrainingObserver*>& observers) {
  result.lastLoss = loss;
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - record.start).count();
  const auto batch = engine.config().batch.trainBatchSize;
  result.samplesPerSecond =
      elapsed > 0 ? (engine.globalSteps() - record.firstStep) * batch / elapsed : 0.0;
  const StepDone done{result.steps, loss, result.samplesPerSecond,
                      record.unit + " " + std::to_string(result.steps) + " done", engine};
  for (TrainingObserver* observer : observers) observer->stepDone(done);
  if (record.printParamHash)
    std::printf("step %" PRId64 " param_hash %016" PRIx64 "\n", result.steps,
                engine.parameterHash());
}

}  // namespace ds::runtime
