// Engine::trainBatch through DeepSpeed's 1F1B schedule on (pipe, data) grids, ranks as threads over
// shared memory, against the data-parallel job (pipe 1) with the same data groups and batches.
// Equal within 1e-5 relative, not bitwise: a pipeline sums the tied embedding's two halves after
// accumulating each over the micro-batches (the whole model adds them per micro-batch), and the
// gradient norm's squares are summed per stage then over the pipe group, both changing the order
// of float additions.
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <mutex>
#include <random>

#include "common/error.h"
#include "runtime/comm/group_factory.h"
#include "runtime/comm/memory_store.h"
#include "runtime/engine/engine.h"
#include "runtime/model/gpt.h"
#include "runtime/model/gpt_stage_partition.h"
#include "runtime/parallel/topology_groups.h"
#include "test/rank_threads.h"

using namespace ds;
using namespace ds::runtime;
using namespace std::chrono_literals;

namespace {

constexpr int kSteps = 3, kMicro = 2, kGas = 4;

GptConfig tinyGpt(bool tied) {
  GptConfig c;
  c.numLayers = 4;
  c.hiddenSize = 32;
  c.numAttentionHeads = 4;
  c.numKvHeads = 2;  // GQA
  c.posEmb = PositionEmbedding::Rotary;
  c.seqLength = 16;
  c.maxPositionEmbeddings = 16;
  c.vocabSize = 50;
  c.makeVocabSizeDivisibleBy = 16;
  c.hiddenDropout = 0.1;  // masks keyed by sample and layer: the same on any stage
  c.weightTying = tied;
  // The key projection's bias has an analytically zero gradient (softmax ignores a shift common to
  // all keys), so its gradient is rounding noise that Adam scales up to +-lr steps: the tied
  // embedding's different summation order changes that noise. Without the tie the stages compute
  // what the whole model does, and the biases stay in.
  c.biasInAttnLinear = !tied;
  return c;
}

std::string config(int stage, const std::string& extra = "") {
  return R"({"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 4,
    "gradient_clipping": 0.5,
    "optimizer": {"type": "AdamW", "params": {"lr": 0.002, "weight_decay": 0.01}},
    "zero_optimization": {"stage": )" +
         std::to_string(stage) + "}" + (extra.empty() ? "" : ", " + extra) + "}";
}

// Micro-batch m of step s on data rank d: deterministic tokens, global sample ids.
Batch microBatch(const GptConfig& c, int64_t step, int64_t m, int d, int data) {
  const uint64_t first = static_cast<uint64_t>(((step * kGas + m) * data + d) * kMicro);
  std::mt19937_64 rng(first * 7919 + 17);
  Batch b;
  b.size = kMicro;
  for (int i = 0; i < kMicro * c.seqLength; ++i) {
    b.inputIds.push_back(static_cast<int32_t>(rng() % c.vocabSize));
    b.targetIds.push_back(static_cast<int32_t>(rng() % c.vocabSize));
  }
  for (int s = 0; s < kMicro; ++s) b.sampleIds.push_back(first + s);
  return b;
}

struct GridRun {
  std::vector<std::vector<float>> losses;  // per rank, per step (and the eval loss last)
  std::map<std::string, std::vector<float>> params;  // by name, from data rank 0 of each stage
  std::vector<float> tiedCopy;                       // the last stage's copy, when tied
  std::vector<int64_t> skipped;                      // per rank
  std::vector<double> scales;                        // per rank
};

GridRun runGrid(int pipe, int data, const GptConfig& c, const std::string& json) {
  const PipeModelDataTopology topology(pipe, 1, data);
  const int world = pipe * data;
  const std::vector<int> bounds = gptStageBounds(c, pipe, "type:transformer|mlp");
  MemoryStore store;
  std::mutex mutex;
  GridRun run;
  run.losses.resize(world);
  run.skipped.resize(world);
  run.scales.resize(world);
  ds::test::onThreads(world, [&](int r) {
    GroupOptions options;
    options.bindAddress = "127.0.0.1";
    options.storePrefix = "pipe";
    options.timeout = 60s;
    GroupFactory factory(store, {r, {world}}, options);
    TopologyGroups groups = buildTopologyGroups(factory, topology);
    const int stage = topology.stageOf(r), d = topology.getCoord(r, "data");
    Gpt model(c, GptPlacement{0, 1, nullptr, bounds[stage], bounds[stage + 1]});
    const DeepSpeedConfig ds = parseDeepSpeedConfig(json, data, "test-config");
    ParallelGroups grid{nullptr, groups.pipe.get(), groups.prevStage.get(),
                        groups.nextStage.get(), groups.tied.get()};
    Engine engine(model, ds, *groups.data, 11, grid);
    for (int64_t s = 0; s < kSteps; ++s)
      run.losses[r].push_back(
          engine.trainBatch([&](int64_t m) { return microBatch(c, s, m, d, data); }));
    run.losses[r].push_back(
        engine.evalBatch([&](int64_t m) { return microBatch(c, 100, m, d, data); }));
    const std::vector<float> flat = engine.fullParameters();
    run.skipped[r] = engine.skippedSteps();
    run.scales[r] = engine.lossScale();
    if (d != 0) return;
    std::lock_guard<std::mutex> lock(mutex);
    for (const ParamSpec& p : model.parameters()) {
      std::vector<float> values(flat.begin() + static_cast<std::ptrdiff_t>(p.offset),
                                flat.begin() + static_cast<std::ptrdiff_t>(p.offset + p.numel));
      if (!p.countInGradNorm)
        run.tiedCopy = std::move(values);
      else
        run.params[p.name] = std::move(values);
    }
  });
  return run;
}

void requireClose(const std::vector<float>& got, const std::vector<float>& expected,
                  const std::string& what) {
  INFO(what);
  REQUIRE(got.size() == expected.size());
  for (size_t i = 0; i < got.size(); ++i)
    if (std::fabs(got[i] - expected[i]) > 1e-5 * std::fabs(expected[i]) + 1e-7) {
      INFO("element " << i);
      REQUIRE(got[i] == Approx(expected[i]).epsilon(1e-5));
    }
}

}  // namespace

TEST_CASE("pipeline engine: (pipe, data) grids train as the data-parallel job does",
          "[engine][pipe]") {
  struct Case {
    int pipe, data, zero;
    bool tied, checkpointing;
  };
  const Case k = GENERATE(Case{2, 1, 0, true, false}, Case{2, 1, 1, false, true},
                          Case{4, 1, 1, true, false}, Case{4, 1, 0, false, false},
                          Case{2, 2, 1, true, false}, Case{2, 2, 0, false, false});
  CAPTURE(k.pipe, k.data, k.zero, k.tied, k.checkpointing);
  GptConfig c = tinyGpt(k.tied);
  c.checkpointActivations = k.checkpointing;
  const std::string json = config(k.zero);
  const GridRun reference = runGrid(1, k.data, c, json);
  const GridRun piped = runGrid(k.pipe, k.data, c, json);
  // Every rank of the pipeline returns the last stage's loss, equal to the data-parallel job's.
  for (const auto& losses : piped.losses) {
    REQUIRE(losses.size() == kSteps + 1);
    CHECK(losses == piped.losses.front());
    requireClose(losses, reference.losses.front(), "losses (3 steps, then eval)");
  }
  REQUIRE(piped.params.size() == reference.params.size());
  for (const auto& [name, values] : reference.params)
    requireClose(piped.params.at(name), values, name);
  // The tied copy on the last stage took the same updates as the first stage's.
  if (k.tied) CHECK(piped.tiedCopy == piped.params.at("embed.word_embeddings.weight"));
  if (!k.tied) CHECK(piped.tiedCopy.empty());
}

TEST_CASE("pipeline engine: fp16 skips the same steps on every stage", "[engine][pipe]") {
  const GptConfig c = tinyGpt(true);
  // 2^40 overflows fp16 gradients: the first steps skip and lower the scale, on every stage at
  // once because overflow is agreed over the pipe group.
  const std::string json = config(1, R"("fp16": {"enabled": true, "initial_scale_power": 40})");
  const GridRun reference = runGrid(1, 1, c, json);
  const GridRun piped = runGrid(2, 1, c, json);
  REQUIRE(reference.skipped.front() > 0);
  for (size_t r = 0; r < piped.skipped.size(); ++r) {
    CAPTURE(r);
    CHECK(piped.skipped[r] == reference.skipped.front());
    CHECK(piped.scales[r] == reference.scales.front());
    CHECK(std::isfinite(piped.losses[r].back()));
  }
}

TEST_CASE("pipeline engine: ZeRO 2 and 3 are refused with a pipeline", "[engine][pipe]") {
  const int zero = GENERATE(2, 3);
  const GptConfig c = tinyGpt(true);
  CHECK_THROWS_WITH(runGrid(2, 1, c, config(zero)),
                    Catch::Contains("zero_optimization.stage " + std::to_string(zero)) &&
                        Catch::Contains("incompatible with pipeline parallelism"));
}
