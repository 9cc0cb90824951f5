// DeepSpeed-Ulysses in the GPT: u ranks (threads over an in-process shared-memory group) share
// each sample's positions, attention running on 1/u of the heads over every position. The mean of
// the ranks' losses and of their gradients (what the engine's data-parallel averaging makes of
// them) equals the one-rank model's loss and gradients within 1e-5, for rotary and grouped-query
// attention, learned and sinusoidal positions, sliding windows, dropout (the masks are the whole
// sample's) and activation checkpointing; evaluation too. What it cannot split is refused.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "common/error.h"
#include "runtime/comm/shm_communicator.h"
#include "runtime/model/flat_parameters.h"
#include "runtime/model/gpt.h"
#include "test/gpt_parallel_harness.h"
#include "test/rank_threads.h"

using namespace ds;
using namespace ds::runtime;
using ds::test::onThreads;
using ds::test::shmGroup;

namespace {

constexpr uint64_t kSeed = 99;

struct Variant {
  const char* name;
  GptConfig config;
};

std::vector<Variant> variants() {
  std::vector<Variant> v;
  GptConfig c = test::tinyGpt();  // 8 heads over 4 kv heads: 4 sequence ranks get 2 and 1
  c.numAttentionHeads = 8;
  c.numKvHeads = 4;
  c.posEmb = PositionEmbedding::Rotary;
  v.push_back({"rotary GQA", c});
  c = test::tinyGpt();
  c.numAttentionHeads = 4;
  c.attentionDropout = 0.2;
  c.hiddenDropout = 0.1;
  v.push_back({"learned positions with dropout", c});
  c.checkpointActivations = true;
  v.push_back({"dropout with activation checkpointing", c});
  c = test::tinyGpt();
  c.posEmb = PositionEmbedding::Sinusoidal;
  c.slidingWindowWidth = 5;
  c.gptjResidual = true;
  v.push_back({"sinusoidal, sliding window, gpt-j residual", c});
  return v;
}

struct Pass {
  float loss = 0.0f, evaluated = 0.0f;
  std::vector<float> grads;
  size_t peak = 0;  // activation bytes
};

Pass onePass(Gpt& m, const Batch& batch) {
  std::vector<float> params(m.parameterCount());
  m.initParameters(params.data(), kSeed);
  FlatParameters access(m, params.data());
  Pass p;
  p.loss = m.forwardBackward(batch, access, 1.0f);
  p.grads = access.gradients();
  p.peak = m.peakActivationBytes();
  p.evaluated = m.evaluate(batch, access);
  return p;
}

}  // namespace

TEST_CASE("Ulysses GPT: the sequence ranks' mean loss and gradients equal the one-rank model's",
          "[gpt_ulysses]") {
  const Batch batch = test::tokenBatch(7, 3, 16, 256);
  for (const Variant& variant : variants()) {
    Gpt reference(variant.config);
    const Pass whole = onePass(reference, batch);
    for (int u : {2, 4}) {
      if (variant.config.kvHeads() % u != 0) continue;
      INFO(variant.name << ", sequence_parallel_size " << u);
      auto group = shmGroup(u);
      std::vector<Pass> got(u);
      onThreads(u, [&](int r) {
        GptPlacement placement;
        placement.sequence = &group[r];
        Gpt m(variant.config, placement);
        got[r] = onePass(m, batch);
      });
      double loss = 0.0, evaluated = 0.0;
      std::vector<float> grads(whole.grads.size(), 0.0f);
      for (const Pass& p : got) {
        loss += p.loss / u;
        evaluated += p.evaluated / u;
        for (size_t i = 0; i < grads.size(); ++i) grads[i] += p.grads[i] / static_cast<float>(u);
      }
      // Each rank computed its own positions: its own loss, and fewer activations than one rank
      // holding every position.
      CHECK(got[0].loss != got[1].loss);
      for (const Pass& p : got) CHECK(p.peak < whole.peak);
      CHECK(loss == Approx(whole.loss).epsilon(1e-5));
      CHECK(evaluated == Approx(whole.evaluated).epsilon(1e-5));
      for (const ParamSpec& spec : reference.parameters()) {
        INFO(spec.name);
        CHECK(test::tensorRelativeDifference(grads, whole.grads, spec) < 1e-5);
      }
    }
  }
}

TEST_CASE("Ulysses GPT: heads that do not divide, and other parallelism, are refused by name",
          "[gpt_ulysses]") {
  auto group = shmGroup(4);
  GptConfig c = test::tinyGpt();  // 4 heads
  c.numKvHeads = 2;
  GptPlacement placement;
  placement.sequence = &group[0];
  CHECK_THROWS_WITH(Gpt(c, placement), Catch::Contains("num-kv-heads 2 must divide"));
  auto pair = shmGroup(2);
  placement.modelSize = 2;
  placement.model = &pair[0];
  CHECK_THROWS_WITH(Gpt(test::tinyGpt(), placement), Catch::Contains("model-parallel-size"));
}
