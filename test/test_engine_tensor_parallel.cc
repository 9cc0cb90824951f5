// The sliced GPT trained through the Engine on a model x data grid of 4 ranks (threads; groups
// from buildTopologyGroups over a MemoryStore) against the data-parallel job of the same world and
// global batch: after 3 steps the loss and every parameter (full tensors assembled from the
// slices) agree within 1e-5 relative, fp32: each tensor's ||difference|| / ||tensor||. Not bitwise:
// the sliced model adds partial sums across the model group (and the data group has fewer ranks),
// in another order than the data-parallel job's matrix products and reductions; AdamW's first
// steps (about lr x sign(g)) turn that rounding into visible differences on elements whose
// gradient is near zero, so single elements get a looser bound (1e-4 of the tensor's largest):
// the data-parallel job itself at data 1 against data 4 differs by 2e-5 there. A 16-bit case shows
// the steps agree: same skips and loss scale on every rank. Also: what the engine refuses with a
// model group, the 3D grid (pipe 2 x model 2, Engine::trainBatch) against the same job, and its
// checkpoints resharded to and from data 4, bit for bit.
#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
#include "runtime/comm/memory_store.h"
#include "runtime/config/ds_config.h"
#include "runtime/engine/engine.h"
#include "runtime/model/gpt_stage_partition.h"
#include "runtime/parallel/topology_groups.h"
#include "test/gpt_parallel_harness.h"
#include "test/rank_threads.h"
#include "test/scratch_dir.h"

using namespace ds;
using namespace ds::runtime;
using ds::test::onThreads;

namespace {

constexpr int kWorld = 4, kGlobalBatch = 8, kSteps = 3;

GptConfig rotaryGqa() {
  GptConfig c = test::tinyGpt();
  c.numAttentionHeads = 8;
  c.numKvHeads = 4;
  c.posEmb = PositionEmbedding::Rotary;
  return c;
}

// micro 0: the global batch over the data ranks (no gradient accumulation).
std::string engineJson(int stage, int data, const std::string& precision,
                       const std::string& optimizer = "AdamW", int micro = 0) {
  std::string json = R"({"train_batch_size": )" + std::to_string(kGlobalBatch) +
                     R"(, "train_micro_batch_size_per_gpu": )" +
                     std::to_string(micro > 0 ? micro : kGlobalBatch / data) +
                     R"(, "optimizer": {"type": ")" + optimizer +
                     R"(", "params": {"lr": 0.01, "weight_decay": 0.01}},
    "gradient_clipping": 1.0,
    "zero_optimization": {"stage": )" +
                     std::to_string(stage) +
                     R"(, "reduce_bucket_size": 3000, "allgather_bucket_size": 3000,
    "stage3_param_persistence_threshold": 0})";
  if (precision == "bf16") json += R"(, "bf16": {"enabled": true})";
  if (precision == "fp16") json += R"(, "fp16": {"enabled": true, "initial_scale_power": 17})";
  return json + "}";
}

struct GridRun {
  std::vector<float> full;    // the assembled one-rank parameters (rank 0's view of its replica)
  std::vector<float> losses;  // model rank 0, data rank 0: per step
  std::vector<int64_t> skipped;
  std::vector<double> lossScale;
  bool replicatedAgree = true;  // replicated tensors equal across model ranks, bit for bit
};

// Trains kSteps on a (model, data) grid of kWorld ranks, data-parallel rank d feeding the samples
// [step * global + d * micro, + micro) of each step.
GridRun trainGrid(const GptConfig& config, int model, int stage, const std::string& precision,
                  int world = kWorld) {
  const int data = world / model;
  const PipeModelDataTopology topology(1, model, data);
  MemoryStore store;
  std::vector<std::vector<float>> local(world);
  std::vector<std::unique_ptr<Gpt>> models(world);
  GridRun run;
  run.skipped.assign(world, 0);
  run.lossScale.assign(world, 0.0);
  std::vector<std::vector<float>> losses(world);
  onThreads(world, [&](int r) {
    GroupFactory factory(store, {r, {world}},
                         test::loopbackGroupOptions("gtp" + std::to_string(model)));
    TopologyGroups groups = buildTopologyGroups(factory, topology);
    const int modelRank = groups.model->rank(), dataRank = groups.data->rank();
    models[r] = std::make_unique<Gpt>(config, GptPlacement{modelRank, model, groups.model.get()});
    const auto dsConfig = parseDeepSpeedConfig(engineJson(stage, data, precision), data, "tp-test");
    Engine engine(*models[r], dsConfig, *groups.data, 7,
                  ParallelGroups{groups.model.get(), nullptr});
    const size_t micro = kGlobalBatch / data;
    for (int s = 0; s < kSteps; ++s) {
      const uint64_t first = static_cast<uint64_t>(s * kGlobalBatch) + dataRank * micro;
      losses[r].push_back(engine.forwardBackward(
          test::tokenBatch(first, micro, config.seqLength, config.vocabSize)));
      engine.step();
    }
    local[r] = engine.fullParameters();
    run.skipped[r] = engine.skippedSteps();
    run.lossScale[r] = engine.lossScale();
  });
  // Ranks 0..model-1 are data replica 0's model group (model varies fastest).
  const Gpt reference(config);
  run.full.assign(reference.parameterCount(), 0.0f);
  std::vector<int> writes(run.full.size(), 0);
  for (int r = 0; r < model; ++r) {
    std::vector<float> before = run.full;
    test::scatterSlice(*models[r], local[r], reference.parameters(), run.full, writes);
    const auto& specs = models[r]->parameters();
    for (size_t t = 0; r > 0 && t < specs.size(); ++t)
      if (specs[t].slice.whole())
        for (size_t e = 0; e < specs[t].numel; ++e)
          if (before[reference.parameters()[t].offset + e] != local[r][specs[t].offset + e])
            run.replicatedAgree = false;
  }
  // The mean of the data replicas' micro-batch losses, as a data-parallel job would report.
  for (int s = 0; s < kSteps; ++s) {
    double sum = 0.0;
    for (int d = 0; d < data; ++d) sum += losses[d * model][s];
    run.losses.push_back(static_cast<float>(sum / data));
  }
  return run;
}

void requireSameTraining(const GridRun& got, const GridRun& want, const GptConfig& config) {
  const Gpt reference(config);
  for (int s = 0; s < kSteps; ++s) CHECK(got.losses[s] == Approx(want.losses[s]).epsilon(1e-5));
  CHECK(got.replicatedAgree);
  for (const ParamSpec& spec : reference.parameters()) {
    INFO(spec.name);
    CHECK(test::tensorNormDifference(got.full, want.full, spec) < 1e-5);
    CHECK(test::tensorRelativeDifference(got.full, want.full, spec) < 1e-4);
  }
}

// A (pipe, model, data) grid through Engine::trainBatch: micro-batches of 2 samples, gradient
// accumulation to the global batch; micro-batch m of step s on data rank d holds the samples
// [s * global + (m * data + d) * 2, + 2), which at data 4 is trainGrid's batch of that rank.
// After `steps` steps: saves a checkpoint to `save`, or first loads `load` (then trains on).
struct Grid3Run {
  std::vector<float> full;    // the assembled one-rank parameters (data rank 0's)
  std::vector<float> losses;  // per step, from rank 0
  bool copiesAgree = true;    // replicated tensors and the tied copy: equal bit for bit
  bool allWritten = true;     // the slices and stages cover every element of the full model
};

Grid3Run trainGrid3(const GptConfig& config, int pipe, int model, int data, int zero, int steps,
                    const std::string& save = "", const std::string& load = "") {
  constexpr int kMicro = 2;
  const PipeModelDataTopology topology(pipe, model, data);
  const int world = pipe * model * data;
  const std::vector<int> bounds = gptStageBounds(config, pipe, "type:transformer|mlp");
  MemoryStore store;
  std::vector<std::vector<float>> local(world), losses(world);
  std::vector<std::unique_ptr<Gpt>> models(world);
  onThreads(world, [&](int r) {
    GroupFactory factory(store, {r, {world}}, test::loopbackGroupOptions("g3d"));
    TopologyGroups groups = buildTopologyGroups(factory, topology);
    const int stage = topology.stageOf(r), d = topology.getCoord(r, "data");
    models[r] =
        std::make_unique<Gpt>(config, GptPlacement{groups.model->rank(), model, groups.model.get(),
                                                   bounds[stage], bounds[stage + 1]});
    const auto ds =
        parseDeepSpeedConfig(engineJson(zero, data, "fp32", "AdamW", kMicro), data, "3d-test");
    const ParallelGroups grid{groups.model.get(), groups.pipe.get(), groups.prevStage.get(),
                              groups.nextStage.get(), groups.tied.get()};
    Engine engine(*models[r], ds, *groups.data, 7, grid);
    if (!load.empty()) engine.loadCheckpoint(load);
    for (int s = 0; s < steps; ++s)
      losses[r].push_back(engine.trainBatch([&](int64_t m) {
        const uint64_t first = static_cast<uint64_t>(s * kGlobalBatch + (m * data + d) * kMicro);
        return test::tokenBatch(first, kMicro, config.seqLength, config.vocabSize);
      }));
    if (!save.empty()) engine.saveCheckpoint(save, "grid");
    local[r] = engine.fullParameters();
  });
  Grid3Run run;
  const Gpt reference(config);
  run.full.assign(reference.parameterCount(), 0.0f);
  std::vector<int> writes(run.full.size(), 0);
  for (int r = 0; r < world; ++r)
    if (topology.getCoord(r, "data") == 0)
      test::scatterSlice(*models[r], local[r], reference.parameters(), run.full, writes,
                         &run.copiesAgree);
  run.allWritten = std::count(writes.begin(), writes.end(), 0) == 0;
  run.losses = losses[0];
  return run;
}

}  // namespace

TEST_CASE("engine on a 3D grid: (pipe, model, data) = (2, 2, 1) trains as data 4",
          "[gpt_tensor_parallel][engine][pipe]") {
  // Rotary, GQA, tied embeddings (the last stage's copy sliced by vocabulary rows), ZeRO 1.
  const GptConfig config = rotaryGqa();
  REQUIRE(config.weightTying);
  const GridRun want = trainGrid(config, 1, 1, "fp32");
  const Grid3Run got = trainGrid3(config, 2, 2, 1, 1, kSteps);
  CHECK(got.copiesAgree);
  CHECK(got.allWritten);
  REQUIRE(got.losses.size() == static_cast<size_t>(kSteps));
  for (int s = 0; s < kSteps; ++s) CHECK(got.losses[s] == Approx(want.losses[s]).epsilon(1e-5));
  const Gpt reference(config);
  for (const ParamSpec& spec : reference.parameters()) {
    INFO(spec.name);
    CHECK(test::tensorNormDifference(got.full, want.full, spec) < 1e-5);
    CHECK(test::tensorRelativeDifference(got.full, want.full, spec) < 1e-4);
  }
}

TEST_CASE("engine on a 3D grid: a checkpoint of (2, 2, 1) loads at (1, 1, 4) and back, bit for bit",
          "[gpt_tensor_parallel][engine][pipe]") {
  const GptConfig config = rotaryGqa();
  {
    const std::string dir = test::makeScratchDir("3d-to-data");
    const Grid3Run saved = trainGrid3(config, 2, 2, 1, 1, 2, dir);
    const Grid3Run loaded = trainGrid3(config, 1, 1, 4, 1, 0, "", dir);
    REQUIRE(saved.allWritten);
    CHECK(saved.copiesAgree);
    CHECK(loaded.full == saved.full);
  }
  {
    const std::string dir = test::makeScratchDir("data-to-3d");
    const Grid3Run saved = trainGrid3(config, 1, 1, 4, 1, 2, dir);
    const Grid3Run loaded = trainGrid3(config, 2, 2, 1, 1, 0, "", dir);
    REQUIRE(loaded.allWritten);
    CHECK(loaded.copiesAgree);  // every copy of a replicated tensor, and the tied copy, loaded
    CHECK(loaded.full == saved.full);
  }
}

TEST_CASE("engine with a model group: (model, data) = (2, 2) and (4, 1) train as data 4",
          "[gpt_tensor_parallel][engine]") {
  const GptConfig config = rotaryGqa();
  for (int stage : {0, 1, 2, 3}) {
    const GridRun want = trainGrid(config, 1, stage, "fp32");
    for (int model : {2, 4}) {
      INFO("ZeRO " << stage << ", model " << model << " x data " << kWorld / model);
      requireSameTraining(trainGrid(config, model, stage, "fp32"), want, config);
    }
  }
}

TEST_CASE("engine with a model group: fp16 steps agree across the grid",
          "[gpt_tensor_parallel][engine]") {
  // 2^17 overflows at first: the scale must come down in the same steps on every rank. The
  // reference is the data-parallel job with the same data-parallel size (2): fp16 gradients are
  // summed over the data group, so where they overflow depends on its size (data 4 skips one
  // step more here than data 2 does, with or without slicing).
  const GptConfig config = rotaryGqa();
  const GridRun want = trainGrid(config, 1, 1, "fp16", 2);
  const GridRun got = trainGrid(config, 2, 1, "fp16");
  CHECK(want.skipped[0] > 0);
  CHECK(want.skipped[0] < kSteps);  // and then steps applied: the losses move
  for (int r = 0; r < kWorld; ++r) {
    INFO("rank " << r);
    CHECK(got.skipped[r] == want.skipped[0]);
    CHECK(got.lossScale[r] == want.lossScale[0]);
  }
  for (int s = 0; s < kSteps; ++s) CHECK(got.losses[s] == Approx(want.losses[s]).epsilon(1e-2));
}

TEST_CASE("engine with a model group: Lamb is refused by name", "[gpt_tensor_parallel][engine]") {
  const GptConfig config = rotaryGqa();
  MemoryStore store;
  const PipeModelDataTopology topology(1, 2, 1);
  std::vector<std::string> lamb(2);
  onThreads(2, [&](int r) {
    GroupFactory factory(store, {r, {2}}, test::loopbackGroupOptions("refuse"));
    TopologyGroups groups = buildTopologyGroups(factory, topology);
    Gpt model(config, GptPlacement{r, 2, groups.model.get()});
    const ParallelGroups grid{groups.model.get(), nullptr};
    try {
      Engine engine(model, parseDeepSpeedConfig(engineJson(0, 1, "fp32", "Lamb"), 1, "t"),
                    *groups.data, 7, grid);
    } catch (const Error& e) {
      lamb[r] = e.what();
    }
  });
  for (int r = 0; r < 2; ++r) {
    CHECK(lamb[r].find("Lamb") != std::string::npos);
    CHECK(lamb[r].find("model-parallel-size") != std::string::npos);
  }
}
