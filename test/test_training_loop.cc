// The shared training loop (runtime/train/training_loop.h) driven in one process: ranks as threads over
// the in-process communicator, the MLP engine under it, and a batch source and hooks that record
// what the loop asked of them: accumulation, cadences, the stop vote, the windowed loss and what
// its observers were told.
#include <atomic>
#include <catch2/catch.hpp>
#include <filesystem>
#include <functional>
#include <utility>

#include "test/engine_harness.h"
#include "test/scratch_dir.h"
#include "runtime/train/training_loop.h"
#include "runtime/train/training_monitors.h"
#include "runtime/train/training_step.h"

using namespace ds::runtime;
using ds::test::engineConfig;

namespace {

using MicroStep = std::pair<int64_t, int64_t>;  // (step, micro)

// The teacher task's batches in ds-worker's order, and a record of every hook call.
class Recorder final : public BatchSource, public TrainingHooks {
 public:
  Recorder(const ds::runtime::BatchConfig& batch, int rank, int world)
      : batch_(batch), rank_(rank), world_(world) {}
  ds::runtime::Batch microBatch(int64_t step, int64_t micro) override {
    asked.emplace_back(step, micro);
    return task_.batch(firstSampleOf(step, micro, rank_, world_, batch_), batch_.microBatchPerGpu);
  }
  void afterMicroBatches(int64_t step) override {
    if (onStep) onStep(step);
  }
  void printProgress(const LossWindow& window) override { windows.push_back(window); }
  void evaluate(int64_t steps) override { evaluations.push_back(steps); }

  std::vector<MicroStep> asked;
  std::vector<LossWindow> windows;
  std::vector<int64_t> evaluations;
  std::function<void(int64_t)> onStep;

 private:
  ds::runtime::TeacherTask task_{16, 4, 2024};
  const ds::runtime::BatchConfig& batch_;
  int rank_;
  int world_;
};

// A step whose loss is its number (1, 2, 3, ...), so window means are known exactly.
class NumberedLosses final : public StepSchedule {
 public:
  double runStep(int64_t step) override { return static_cast<double>(step + 1); }
};

// What an observer was told, in order: "started", each phase, "done <steps> <loss>".
class ObserverLog final : public TrainingObserver {
 public:
  void trainingStarted() override { told.push_back("started"); }
  void phaseChanged(const std::string& phase) override { told.push_back(phase); }
  void stepDone(const StepDone& done) override {
    told.push_back("done " + std::to_string(done.steps) + " " + std::to_string(done.loss) + " (" +
                   done.phase + ", engine at " + std::to_string(done.engine.globalSteps()) + ")");
  }
  std::vector<std::string> told;
};

struct RankOutcome {
  TrainResult result;
  std::vector<std::string> told;
  std::vector<MicroStep> asked;
  std::vector<LossWindow> windows;
  std::vector<int64_t> evaluations;
  int64_t engineSteps = 0;
  std::vector<float> params;
};

struct LoopRun {
  int world = 1;
  std::string json = engineConfig(1, "fp32");
  LoopSettings settings;
  bool numberedLosses = false;
  // Called after each step's micro-batches with the rank's stop flag.
  std::function<void(int rank, int64_t step, std::atomic<bool>& stop)> onStep;
};

std::vector<RankOutcome> runLoop(const LoopRun& run) {
  std::vector<RankOutcome> out(run.world);
  ds::runtime::ShmOptions options;
  options.chunkBytes = ds::test::kTestChunkBytes;
  auto group = ds::runtime::ShmCommunicator::inProcessGroup(run.world, options);
  ds::test::onThreads(run.world, [&](int r) {
    const auto config = ds::runtime::parseDeepSpeedConfig(run.json, run.world, "test-config");
    ds::runtime::Mlp model({16, 64, 64, 4});
    ds::runtime::Engine engine(model, config, group[r], 7);
    ObserverLog log;
    TrainingMonitors monitors(config, r);
    std::atomic<bool> stop{false};
    Recorder recorder(config.batch, r, run.world);
    if (run.onStep) recorder.onStep = [&](int64_t step) { run.onStep(r, step, stop); };
    const LoopParts parts{engine, group[r], {&log, &monitors}, r, stop};
    NumberedLosses numbered;
    out[r].result = run.numberedLosses ? runTrainingLoop(run.settings, parts, numbered, recorder)
                                       : runTrainingLoop(run.settings, parts, recorder, recorder);
    out[r].told = log.told;
    out[r].asked = recorder.asked;
    out[r].windows = recorder.windows;
    out[r].evaluations = recorder.evaluations;
    out[r].engineSteps = engine.globalSteps();
    out[r].params = engine.fullParameters();
  });
  return out;
}

bool hasCheckpoint(const std::string& dir, int64_t step) {
  return std::filesystem::exists(std::filesystem::path(dir) /
                                 ("global_step" + std::to_string(step)));
}

}  // namespace

TEST_CASE("training loop: each step runs its micro-batches in order, as the plain engine loop") {
  LoopRun run;
  run.world = 2;
  run.json = engineConfig(2, "fp32", R"("gradient_accumulation_steps": 3)");
  run.settings.lastStep = 4;
  const auto ranks = runLoop(run);
  std::vector<MicroStep> expected;
  for (int64_t step = 0; step < 4; ++step)
    for (int64_t micro = 0; micro < 3; ++micro) expected.emplace_back(step, micro);
  const auto plain = ds::test::trainRanks(2, run.json, 4);
  for (int r = 0; r < 2; ++r) {
    CHECK(ranks[r].asked == expected);
    CHECK(ranks[r].result.steps == 4);
    CHECK(ranks[r].engineSteps == 4);
    CHECK(ranks[r].params == plain[r].params);
  }
}

TEST_CASE("training loop: progress lines carry the mean loss of the steps since the last one") {
  LoopRun run;
  run.numberedLosses = true;
  run.settings.lastStep = 7;
  run.settings.printInterval = 3;
  const auto ranks = runLoop(run);
  const std::vector<std::pair<int64_t, double>> expected = {{1, 1.0}, {3, 2.5}, {6, 5.0}, {7, 7.0}};
  REQUIRE(ranks[0].windows.size() == expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    CHECK(ranks[0].windows[i].steps == expected[i].first);
    CHECK(ranks[0].windows[i].meanLoss == expected[i].second);
    CHECK(ranks[0].windows[i].lastStep == 7);
  }
  CHECK(ranks[0].result.lastLoss == 7.0);
}

TEST_CASE("training loop: observers are told of the start, each phase and each step, in order") {
  LoopRun run;
  run.world = 2;
  run.json = engineConfig(2, "fp32");
  run.settings.lastStep = 2;
  run.settings.saveDir = ds::test::makeScratchDir("loop-observers");
  const auto ranks = runLoop(run);
  for (int r = 0; r < 2; ++r) {
    REQUIRE(ranks[r].windows.size() == 2);  // printInterval 1: each window is one step's loss
    const auto done = [&](int steps, double loss) {
      return "done " + std::to_string(steps) + " " + std::to_string(loss) + " (step " +
             std::to_string(steps) + " done, engine at " + std::to_string(steps) + ")";
    };
    const std::vector<std::string> expected = {"started",
                                               "step 1: stop-vote all_reduce",
                                               "step 1: forward/backward",
                                               done(1, ranks[r].windows[0].meanLoss),
                                               "step 2: stop-vote all_reduce",
                                               "step 2: forward/backward",
                                               done(2, ranks[r].result.lastLoss),
                                               "step 2: saving checkpoint"};
    CHECK(ranks[r].told == expected);
  }
}

TEST_CASE("training loop: checkpoints every save interval and at the last step") {
  LoopRun run;
  run.settings.lastStep = 5;
  run.settings.saveInterval = 2;
  run.settings.saveDir = ds::test::makeScratchDir("loop-save");
  runLoop(run);
  for (int64_t step = 1; step <= 5; ++step) {
    INFO("step " << step);
    CHECK(hasCheckpoint(run.settings.saveDir, step) == (step % 2 == 0 || step == 5));
  }
}

TEST_CASE("training loop: evaluates every eval interval and at the end, not at a stop") {
  LoopRun run;
  run.settings.lastStep = 7;
  run.settings.evalInterval = 3;
  CHECK(runLoop(run)[0].evaluations == std::vector<int64_t>{3, 6, 7});

  // exit-interval: save and leave after step 4, with the evaluation of step 3 only.
  run.settings.exitInterval = 4;
  run.settings.saveDir = ds::test::makeScratchDir("loop-exit");
  const auto exited = runLoop(run)[0];
  CHECK(exited.result.steps == 4);
  CHECK(exited.evaluations == std::vector<int64_t>{3});
  CHECK(hasCheckpoint(run.settings.saveDir, 4));
  CHECK_FALSE(hasCheckpoint(run.settings.saveDir, 7));
}

TEST_CASE("training loop: one rank's stop request stops every rank at the next step, saved") {
  LoopRun run;
  run.world = 2;
  run.json = engineConfig(1, "fp32");
  run.settings.lastStep = 10;
  run.settings.saveDir = ds::test::makeScratchDir("loop-stop");
  run.onStep = [](int rank, int64_t step, std::atomic<bool>& stop) {
    if (rank == 1 && step == 2) stop = true;
  };
  const auto ranks = runLoop(run);
  for (int r = 0; r < 2; ++r) {
    CHECK(ranks[r].result.steps == 3);
    CHECK(ranks[r].engineSteps == 3);
  }
  CHECK(hasCheckpoint(run.settings.saveDir, 3));
  CHECK_FALSE(hasCheckpoint(run.settings.saveDir, 4));
  CHECK(ranks[0].params == ranks[1].params);
}
