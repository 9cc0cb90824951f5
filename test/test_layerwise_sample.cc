// Generation through the engine's layer access (Engine::inferencePass, what the GPT job's closing
// sample uses) against generation from the whole parameter buffer (fullParameters, what it used
// before): the same tokens at ZeRO 0 and 3, fp32 and bf16, after training steps, on every rank;
// and on a model x data grid, where the sliced model's logits are gathered over the model group.
#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>

#include "runtime/comm/memory_store.h"
#include "runtime/config/ds_config.h"
#include "runtime/engine/engine.h"
#include "runtime/model/flat_parameters.h"
#include "runtime/model/sampler.h"
#include "runtime/parallel/topology_groups.h"
#include "test/gpt_parallel_harness.h"
#include "test/rank_threads.h"

using namespace ds;
using namespace ds::runtime;
using ds::test::onThreads;

namespace {

std::string sampleJson(int stage, int world, const std::string& precision) {
  std::string json = R"({"train_batch_size": )" + std::to_string(2 * world) +
                     R"(, "train_micro_batch_size_per_gpu": 2,
    "optimizer": {"type": "AdamW", "params": {"lr": 0.01}},
    "zero_optimization": {"stage": )" +
                     std::to_string(stage) + R"(, "stage3_param_persistence_threshold": 0})";
  if (precision == "bf16") json += R"(, "bf16": {"enabled": true})";
  return json + "}";
}

SamplingOptions sampling() {
  SamplingOptions o;
  o.maxNewTokens = 12;
  o.temperature = 0.8;
  o.topK = 8;
  o.seed = 5;
  return o;
}

}  // namespace

TEST_CASE("layerwise sample: the engine's layer access gives the whole-buffer tokens",
          "[gpt][sample]") {
  const auto [stage, precision] = GENERATE(std::pair{0, "fp32"}, std::pair{3, "fp32"},
                                           std::pair{3, "bf16"}, std::pair{1, "bf16"});
  constexpr int kWorld = 2;
  INFO("stage " << stage << ", " << precision);
  const GptConfig config = test::tinyGpt();
  MemoryStore store;
  std::vector<std::vector<int32_t>> whole(kWorld), layered(kWorld);
  onThreads(kWorld, [&](int r) {
    GroupFactory factory(store, {r, {kWorld}}, test::loopbackGroupOptions("sample"));
    const PipeModelDataTopology topology(1, 1, kWorld);
    TopologyGroups groups = buildTopologyGroups(factory, topology);
    Gpt model(config);
    const auto ds = parseDeepSpeedConfig(sampleJson(stage, kWorld, precision), kWorld, "sample");
    Engine engine(model, ds, *groups.data, 11);
    for (int s = 0; s < 2; ++s) {
      engine.forwardBackward(test::tokenBatch(static_cast<uint64_t>(4 * s + 2 * r), 2,
                                              config.seqLength, config.vocabSize));
      engine.step();
    }
    const std::vector<int32_t> prompt = {3, 1, 4, 1, 5};
    const std::vector<float> params = engine.fullParameters();
    whole[r] = generateTokens(model, params.data(), prompt, sampling());
    layered[r] = generateTokens(
        model,
        [&](const std::vector<int32_t>& context) {
          std::vector<float> logits;
          engine.inferencePass(
              [&](LayerAccess& access) { logits = model.nextTokenLogits(context, access); });
          return logits;
        },
        prompt, sampling());
  });
  REQUIRE(whole[0].size() == 12);
  for (int r = 0; r < kWorld; ++r) {
    CHECK(layered[r] == whole[0]);
    CHECK(whole[r] == whole[0]);
  }
}

TEST_CASE("layerwise sample: a model x data grid samples in lockstep", "[gpt][sample]") {
  constexpr int kWorld = 4, kModel = 2;
  const GptConfig config = test::tinyGpt();
  MemoryStore store;
  std::vector<std::vector<int32_t>> tokens(kWorld);
  std::vector<std::vector<float>> firstLogits(kWorld);
  onThreads(kWorld, [&](int r) {
    GroupFactory factory(store, {r, {kWorld}}, test::loopbackGroupOptions("samplegrid"));
    const PipeModelDataTopology topology(1, kModel, kWorld / kModel);
    TopologyGroups groups = buildTopologyGroups(factory, topology);
    Gpt model(config, GptPlacement{groups.model->rank(), kModel, groups.model.get()});
    const auto ds =
        parseDeepSpeedConfig(sampleJson(3, kWorld / kModel, "fp32"), kWorld / kModel, "sample");
    Engine engine(model, ds, *groups.data, 11, ParallelGroups{groups.model.get(), nullptr});
    tokens[r] = generateTokens(
        model,
        [&](const std::vector<int32_t>& context) {
          std::vector<float> logits;
          engine.inferencePass(
              [&](LayerAccess& access) { logits = model.nextTokenLogits(context, access); });
          if (firstLogits[r].empty()) firstLogits[r] = logits;
          return logits;
        },
        {2, 7, 1, 8}, sampling());
  });
  // The unsliced model from the same seed: its logits within rounding of the gathered ones.
  const Gpt reference(config);
  std::vector<float> params(reference.parameterCount());
  reference.initParameters(params.data(), 11);
  Gpt referenceModel(config);
  FlatParameters access(referenceModel, params.data());
  const std::vector<float> expected = referenceModel.nextTokenLogits({2, 7, 1, 8}, access);
  for (int r = 0; r < kWorld; ++r) {
    CHECK(tokens[r] == tokens[0]);
    REQUIRE(firstLogits[r].size() >= static_cast<size_t>(config.vocabSize));
    for (int v = 0; v < config.vocabSize; ++v)
      CHECK(firstLogits[r][v] == Approx(expected[v]).margin(1e-4));
  }
  CHECK(tokens[0].size() == 12);
}
