// Trains the built-in MLP with the Engine on N ranks (threads over the in-process communicator)
// from a JSON config, on the same deterministic data split as ds-worker's train job, so tests can
// compare stages, precisions, world sizes and resumed runs.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "comm_harness.h"
#include "runtime/config/ds_config.h"
#include "runtime/engine/engine.h"
#include "runtime/model/mlp.h"

namespace ds::test {

// {"train_batch_size": 16, ...} with the ZeRO stage, precision block and extra keys spliced in.
inline std::string engineConfig(int stage, const std::string& precision,
                                const std::string& extra = "") {
  std::string json =
      R"({"train_batch_size": 24, "optimizer": {"type": "AdamW", "params": {"lr": 0.01, "weight_decay": 0.01}},
    "zero_optimization": {"stage": )" +
      std::to_string(stage) +
      R"(, "reduce_bucket_size": 3000, "allgather_bucket_size": 3000,
    "stage3_param_persistence_threshold": 0})";
  if (precision == "bf16") json += R"(, "bf16": {"enabled": true})";
  if (precision == "fp16") json += R"(, "fp16": {"enabled": true, "initial_scale_power": 12})";
  if (!extra.empty()) json += ", " + extra;
  return json + "}";
}

struct RankRun {
  std::vector<float> params;  // fullParameters() at the end
  std::vector<float> losses;  // per step
  runtime::MemoryUsage memory;
  int64_t skipped = 0;
  double lr = 0.0;
  double lossScale = 0.0;
};

// Runs `steps` optimizer steps on `world` ranks. `before(engine, rank)` runs after construction
// (e.g. loadCheckpoint), `after(engine, rank)` at the end (e.g. saveCheckpoint). `widths`: the
// MLP's layer sizes (16 inputs and 4 outputs, the teacher task's).
inline std::vector<RankRun> trainRanks(
    int world, const std::string& json, int steps,
    const std::function<void(runtime::Engine&, int)>& before = {},
    const std::function<void(runtime::Engine&, int)>& after = {},
    const std::vector<int>& widths = {16, 64, 64, 4}) {
  std::vector<RankRun> runs(world);
  runtime::ShmOptions options;
  options.chunkBytes = kTestChunkBytes;
  auto group = runtime::ShmCommunicator::inProcessGroup(world, options);
  onThreads(world, [&](int r) {
    const auto config = runtime::parseDeepSpeedConfig(json, world, "test-config");
    runtime::Mlp model(widths);
    runtime::TeacherTask task(16, 4, 2024);
    runtime::Engine engine(model, config, group[r], 7);
    if (before) before(engine, r);
    const auto& b = config.batch;
    for (int s = 0; s < steps; ++s) {
      const int64_t step = engine.globalSteps();
      float loss = 0.0f;
      for (int64_t micro = 0; micro < b.gradientAccumulationSteps; ++micro) {
        const uint64_t first = static_cast<uint64_t>(
            step * b.trainBatchSize + micro * b.microBatchPerGpu * world + r * b.microBatchPerGpu);
        loss += engine.forwardBackward(task.batch(first, b.microBatchPerGpu));
        engine.step();
      }
      runs[r].losses.push_back(loss);
    }
    if (after) after(engine, r);
    runs[r].params = engine.fullParameters();
    runs[r].memory = engine.memory();
    runs[r].skipped = engine.skippedSteps();
    runs[r].lr = engine.lr();
    runs[r].lossScale = engine.lossScale();
  });
  return runs;
}

}  // namespace ds::test
