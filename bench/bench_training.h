// How a benchmark trains: the product's training loop (runtime/train/training_loop.h) on one fixed
// batch, so a bench measures the steps users run and not a loop of its own. A step's timed window
// runs from its first forward to the end of its update; the loop's own work between steps (the
// stop vote, the step record) and the probe's beforeStep and afterStep callbacks fall outside it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>

#include "runtime/comm/communicator.h"
#include "runtime/engine/engine.h"
#include "runtime/train/training_loop.h"

namespace ds::bench {

struct StepTiming {
  int64_t step = 0;            // from 0
  double seconds = 0.0;        // the first forward to the end of engine.step()
  double updateSeconds = 0.0;  // the last engine.step(): the update at the boundary
  double loss = 0.0;
};

struct StepProbe {
  std::function<void(int64_t step)> beforeStep;
  // After the last micro-batch's forward and backward, before the update: inside the timed window.
  std::function<void(int64_t step)> afterBackward;
  std::function<void(const StepTiming& timing)> afterStep;
};

namespace detail {

class ProbedSteps final : public runtime::BatchSource,
                          public runtime::TrainingHooks,
                          public runtime::TrainingObserver {
 public:
  ProbedSteps(const runtime::Batch& batch, int64_t micros, const StepProbe& probe)
      : batch_(batch), micros_(micros), probe_(probe) {}
  runtime::Batch microBatch(int64_t, int64_t) override { return batch_; }
  void beforeMicroBatch(int64_t step, int64_t micro) override {
    if (micro != 0) return;
    if (probe_.beforeStep) probe_.beforeStep(step);
    start_ = Clock::now();
  }
  void afterBackward(int64_t step, int64_t micro) override {
    if (micro != micros_ - 1) return;
    if (probe_.afterBackward) probe_.afterBackward(step);
    updateStart_ = Clock::now();
  }
  void afterMicroBatches(int64_t step) override {
    const auto end = Clock::now();
    timing_ = {step, std::chrono::duration<double>(end - start_).count(),
               std::chrono::duration<double>(end - updateStart_).count(), 0.0};
  }
  void printProgress(const runtime::LossWindow&) override {}
  void stepDone(const runtime::StepDone& done) override {
    timing_.loss = done.loss;
    if (probe_.afterStep) probe_.afterStep(timing_);
  }

 private:
  using Clock = std::chrono::steady_clock;
  const runtime::Batch& batch_;
  const int64_t micros_;
  const StepProbe& probe_;
  Clock::time_point start_, updateStart_;
  StepTiming timing_;
};

}  // namespace detail

// Trains `engine` from its current step until it has done `lastStep` steps, every micro-batch
// `batch`. Collective over `comm`, as the loop's stop vote is: every rank calls it.
inline runtime::TrainResult trainSteps(runtime::Engine& engine, runtime::Communicator& comm,
                                       const runtime::Batch& batch, int64_t lastStep,
                                       const StepProbe& probe = {}) {
  detail::ProbedSteps steps(batch, engine.config().batch.gradientAccumulationSteps, probe);
  runtime::LoopSettings settings;
  settings.lastStep = lastStep;
  settings.printInterval = lastStep > 0 ? lastStep : 1;
  const std::atomic<bool> never{false};
  return runtime::runTrainingLoop(settings, {engine, comm, {&steps}, comm.rank(), never}, steps,
                                  steps);
}

}  // namespace ds::bench
