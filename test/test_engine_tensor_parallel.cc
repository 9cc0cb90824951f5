// The sliced GPT trained through the Engine on a model x data grid of 4 ranks (threads; groups
// from buildTopologyGroups over a MemoryStore) against the data-parallel job of the same world and
// global batch: after 3 steps the loss and every parameter (full tensors assembled from the
// slices) agree within 1e-5 relative, fp32. Not bitwise: the sliced model adds partial sums across
// the model group (and the data group has fewer ranks), in another order than the data-parallel
// job's matrix products and reductions. A 16-bit case shows the steps agree: same skips and loss
// scale on every rank. Also: what the engine refuses with a model group.
#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
#include "runtime/comm/memory_store.h"
#include "runtime/config/ds_config.h"
#include "runtime/engine/engine.h"
#include "runtime/parallel/topology_groups.h"
#include "test/gpt_parallel_harness.h"
#include "test/rank_threads.h"

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

std::string engineJson(int stage, int data, const std::string& precision,
                       const std::string& optimizer = "AdamW") {
  std::string json = R"({"train_batch_size": )" + std::to_string(kGlobalBatch) +
                     R"(, "train_micro_batch_size_per_gpu": )" +
                     std::to_string(kGlobalBatch / data) + R"(, "optimizer": {"type": ")" +
                     optimizer + R"(", "params": {"lr": 0.01, "weight_decay": 0.01}},
    "gradient_clipping": 1.0,
    "zero_optimization": {"stage": )" + std::to_string(stage) +
                     R"(, "reduce_bucket_size": 3000, "allgather_bucket_size": 3000,
    "stage3_param_persistence_threshold": 0})";
  if (precision == "bf16") json += R"(, "bf16": {"enabled": true})";
  if (precision == "fp16") json += R"(, "fp16": {"enabled": true, "initial_scale_power": 30})";
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
GridRun trainGrid(const GptConfig& config, int model, int stage, const std::string& precision) {
  const int data = kWorld / model;
  const PipeModelDataTopology topology(1, model, data);
  MemoryStore store;
  std::vector<std::vector<float>> local(kWorld);
  std::vector<std::unique_ptr<Gpt>> models(kWorld);
  GridRun run;
  run.skipped.assign(kWorld, 0);
  run.lossScale.assign(kWorld, 0.0);
  std::vector<std::vector<float>> losses(kWorld);
  onThreads(kWorld, [&](int r) {
    GroupFactory factory(store, {r, {kWorld}},
                         test::loopbackGroupOptions("gtp" + std::to_string(model)));
    TopologyGroups groups = buildTopologyGroups(factory, topology);
    const int modelRank = groups.model->rank(), dataRank = groups.data->rank();
    models[r] = std::make_unique<Gpt>(config, GptPlacement{modelRank, model, groups.model.get()});
    const auto dsConfig = parseDeepSpeedConfig(engineJson(stage, data, precision), data, "tp-test");
    Engine engine(*models[r], dsConfig, *groups.data, 7, ParallelGroups{groups.model.get(), nullptr});
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
      if (models[r]->fullTensor(t).rows.empty())
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
    CHECK(test::tensorRelativeDifference(got.full, want.full, spec) < 1e-5);
  }
}

}  // namespace

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
  // 2^30 overflows at first: the scale must come down in the same steps on every rank, as in
  // the data-parallel job.
  const GptConfig config = rotaryGqa();
  const GridRun want = trainGrid(config, 1, 1, "fp16");
  const GridRun got = trainGrid(config, 2, 1, "fp16");
  CHECK(want.skipped[0] > 0);
  for (int r = 0; r < kWorld; ++r) {
    INFO("rank " << r);
    CHECK(got.skipped[r] == want.skipped[0]);
    CHECK(got.lossScale[r] == want.lossScale[0]);
  }
  for (int s = 0; s < kSteps; ++s) CHECK(got.losses[s] == Approx(want.losses[s]).epsilon(1e-2));
}

TEST_CASE("engine with a model group: Lamb is refused by name",
          "[gpt_tensor_parallel][engine]") {
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
