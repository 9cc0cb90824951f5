// The one training loop of the built-in trainers (the MLP's and the GPT's, data-parallel or
// pipelined) and of the benchmarks: steps, gradient accumulation, the stop vote, checkpoint on
// stop, the windowed loss, evaluation, save and exit cadence, and the test-only hang. What a
// trainer adds (its data, its progress line, its evaluation) comes in through BatchSource and
// TrainingHooks, who watches (progress board, monitors) through TrainingObserver; building the
// model and the engine, and what happens after training, stay with the trainer.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include <vector>

#include "runtime/comm/communicator.h"
#include "runtime/engine/engine.h"
#include "runtime/model/model.h"
#include "runtime/train/train_result.h"
#include "runtime/train/training_observer.h"

namespace ds::runtime {

// A trainer's data: the micro-batch this rank trains on at (step, micro-step), steps from 0.
class BatchSource {
 public:
  virtual ~BatchSource() = default;
  virtual Batch microBatch(int64_t step, int64_t micro) = 0;
};

// The steps since the last progress line, ending at `steps`.
struct LossWindow {
  int64_t steps = 0;      // steps done
  int64_t lastStep = 0;   // the step training ends at
  double meanLoss = 0.0;  // over the window's steps: less noisy than one step's
  double samplesPerSecond = 0.0;
};

// What a trainer adds to the loop. Every hook runs on every rank at the same point of the same
// step, so a hook may use collectives (an evaluation averages over ranks).
class TrainingHooks {
 public:
  virtual ~TrainingHooks() = default;
  // Before the micro-batch `micro` of `step` (steps from 0) is fetched and run.
  virtual void beforeMicroBatch(int64_t /*step*/, int64_t /*micro*/) {}
  // After that micro-batch's forward and backward, before engine.step() (data-parallel steps).
  virtual void afterBackward(int64_t /*step*/, int64_t /*micro*/) {}
  // After all of the step's micro-batches, before the step is recorded.
  virtual void afterMicroBatches(int64_t /*step*/) {}
  // The progress line: at the first step, every printInterval steps and at the last.
  virtual void printProgress(const LossWindow& window) = 0;
  // Every evalInterval steps, except the last, and once more at the end when training reached
  // its last step (not after a stop or an exit-interval).
  virtual void evaluate(int64_t /*steps*/) {}
};

// How one optimizer step's micro-batches are run; returns the step's mean loss. Data-parallel
// trainers accumulate (AccumulatingStep); a pipeline schedule interleaves them over its stages.
class StepSchedule {
 public:
  virtual ~StepSchedule() = default;
  virtual double runStep(int64_t step) = 0;
};

// Each micro-batch in turn: forward and backward, then engine.step(), which applies the update at
// the accumulation boundary.
class AccumulatingStep final : public StepSchedule {
 public:
  AccumulatingStep(Engine& engine, BatchSource& source, TrainingHooks& hooks)
      : engine_(engine), source_(source), hooks_(hooks) {}
  double runStep(int64_t step) override;

 private:
  Engine& engine_;
  BatchSource& source_;
  TrainingHooks& hooks_;
};

// A pipeline's step, DeepSpeed's train_batch: every micro-batch through the 1F1B schedule over
// the stages and the update, in one engine call (runtime/engine/engine.h trainBatch).
class PipelineStep final : public StepSchedule {
 public:
  PipelineStep(Engine& engine, BatchSource& source)
      : engine_(engine), source_(source) {}
  double runStep(int64_t step) override;

 private:
  Engine& engine_;
  BatchSource& source_;
};

// When things happen, and the words the observers are told.
struct LoopSettings {
  int64_t lastStep = 0;       // train until the engine has done this many steps
  int64_t printInterval = 1;  // progress line every N steps (and at the first and the last)
  int64_t evalInterval = 0;   // 0: no evaluation
  int64_t saveInterval = 0;   // 0: a checkpoint at the last step only
  // Beside saveInterval: also save after the steps (counted from 1) it accepts (NeoX's
  // checkpoint-factor and extra-save-iters); asked for 0 once, before the first step of a run
  // that starts from 0 (NeoX's step-0 checkpoint). Empty: no such saves.
  std::function<bool(int64_t steps)> saveAt;
  // After each save, delete the oldest checkpoints of saveDir beyond this many (NeoX's
  // keep-last-n-checkpoints; runtime/checkpoint/checkpoint_retention.h); 0: keep every one.
  int64_t keepCheckpoints = 0;
  int64_t exitInterval = 0;  // save and stop every N steps (NeoX's exit-interval); 0: never
  std::string saveDir;       // "": no checkpoints, on stop neither
  bool printParamHash = false;
  // Fault injection (--hang_at_step): rank hangRank stops making progress at this step.
  int64_t hangAtStep = -1;
  int hangRank = 0;
  // The steps (counted from 1) after profileFrom up to profileTo are timed into
  // TrainResult::profiledStepSeconds (an autotuning experiment's); -1: none.
  int64_t profileFrom = -1, profileTo = -1;
  std::string unit = "step";  // "step" or "iteration", in phases and the exit line
  // The phase while a step runs. The launcher's stall report treats a phase naming a
  // collective ("all_reduce") as waiting for peers, so say so only when the step is one.
  std::string stepPhase = "forward/backward";
};

// What the loop works on; the trainer owns all of it.
struct LoopParts {
  Engine& engine;
  Communicator& comm;  // the stop vote's
  std::vector<TrainingObserver*> observers;  // told of phases and steps, in this order
  int rank = 0;
  const std::atomic<bool>& stopRequested;
  // Where each step's loss is averaged before it is reported (NeoX reports the mean over the
  // data-parallel ranks); null: each rank reports its own.
  Communicator* lossGroup = nullptr;
};

// Collective: every rank runs it with the same settings. Starts at the engine's step (a resumed
// run carries on), tells the observers training started, and returns the steps done, the last loss and
// samples/s; wallSeconds is the loop's own time, from its start to its end.
TrainResult runTrainingLoop(const LoopSettings& settings, const LoopParts& parts,
                            StepSchedule& schedule, TrainingHooks& hooks);
// The same with AccumulatingStep over `source`.
TrainResult runTrainingLoop(const LoopSettings& settings, const LoopParts& parts,
                            BatchSource& source, TrainingHooks& hooks);

}  // namespace ds::runtime
