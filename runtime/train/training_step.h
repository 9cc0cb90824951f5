// What the training loop (runtime/train/training_loop.h) does around each step: agree on stopping,
// keep the work since the last checkpoint when stopping, and record a finished step (result,
// parameter hash, observers); and where a rank's samples of a step start.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/comm/communicator.h"
#include "runtime/engine/engine.h"
#include "runtime/train/train_result.h"
#include "runtime/train/training_observer.h"

namespace ds::runtime {

// The global index of the first sample `rank` trains on at (step, micro-step): the order is step,
// then micro-step, then rank, so any world size sees the same samples in the same order.
inline uint64_t firstSampleOf(int64_t step, int64_t micro, int rank, int worldSize,
                              const BatchConfig& batch) {
  return static_cast<uint64_t>(step * batch.trainBatchSize +
                               micro * batch.microBatchPerGpu * worldSize +
                               rank * batch.microBatchPerGpu);
}

// Collective, once per step: true when any rank was asked to stop, so no rank is left in a
// collective the others have abandoned.
bool everyRankStops(Communicator& comm, const std::atomic<bool>& stopRequested);

// STOP is graceful: every rank saves the current step into saveDir (unless an interval save
// already wrote it) and rank 0 says where. Collective; nothing without a save directory.
void checkpointOnStop(Engine& engine, const std::string& saveDir, int rank);

struct StepRecord {
  std::chrono::steady_clock::time_point start;  // when the loop began
  int64_t firstStep;                            // the engine's step count then
  bool printParamHash;
  std::string unit;  // "step" or "iteration", for the progress phase
};
// After step `result.steps`, with its mean loss.
void recordStep(TrainResult& result, double loss, Engine& engine, const StepRecord& record,
                const std::vector<TrainingObserver*>& observers);

}  // namespace ds::runtime
