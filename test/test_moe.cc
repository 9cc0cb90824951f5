// Mixture of experts: routing and DeepSpeed's gating against a float64 PyTorch reference written
// from NeoX's router.py and DeepSpeed's sharded_moe.py (test/reference/moe_reference.py: the
// experts chosen, their weights, capacity, dropped choices, l_aux and the logits' gradient), with
// the same random draws; the config keys and their refusals.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "runtime/model/gpt_config.h"
#include "runtime/model/moe_routing.h"
#include "test/scratch_dir.h"
#include "test/skip.h"
#include "test/torch_python.h"

using namespace ds::runtime;
using Json = nlohmann::json;

namespace {

using ds::test::torchAvailable;
std::string python() { return ds::test::torchPython(); }

Json runReference(const Json& in) {
  const std::filesystem::path dir = ds::test::makeScratchDir("moe-reference");
  std::ofstream(dir / "in.json") << in.dump();
  const std::string cmd = python() + " " DS_SOURCE_DIR "/test/reference/moe_reference.py " +
                          (dir / "in.json").string() + " " + (dir / "out.json").string() + " >" +
                          (dir / "err").string() + " 2>&1";
  const int status = std::system(cmd.c_str());
  std::ifstream err(dir / "err");
  INFO(cmd << "\n" << std::string(std::istreambuf_iterator<char>(err), {}));
  REQUIRE(status == 0);
  Json out = Json::parse(std::ifstream(dir / "out.json"));
  std::filesystem::remove_all(dir);
  return out;
}

struct Case {
  std::string name;
  MoeConfig config;
  bool training;
};

MoeConfig dropless(int k, MoeRouter router) {
  MoeConfig c;
  c.numExperts = 4;
  c.topK = k;
  c.router = router;
  return c;
}

MoeConfig deepspeed(int k, bool drop, bool rts, NoisyGate noise = NoisyGate::None) {
  MoeConfig c;
  c.numExperts = 4;
  c.kind = MoeKind::DeepSpeed;
  c.topK = k;
  c.tokenDropping = drop;
  c.useRts = rts;
  c.noisyGate = noise;
  c.trainCapacityFactor = 0.5;  // capacity 3 (top-2: 6) for 24 tokens: experts overflow
  c.evalCapacityFactor = 0.75;
  c.minCapacity = 2;
  return c;
}

}  // namespace

TEST_CASE("MoE routing and DeepSpeed's gating equal the float64 PyTorch reference",
          "[moe][torch]") {
  if (ds::test::skipUnless(torchAvailable(), python() + " cannot import torch; install "
                                                        "python3-torch (scripts/setup --test)"))
    return;
  const std::vector<Case> cases = {
      {"dropless topk k=1", dropless(1, MoeRouter::TopK), true},
      {"dropless topk k=2", dropless(2, MoeRouter::TopK), true},
      {"dropless sinkhorn k=1 training", dropless(1, MoeRouter::Sinkhorn), true},
      {"dropless sinkhorn k=2 training", dropless(2, MoeRouter::Sinkhorn), true},
      {"dropless sinkhorn k=1 evaluation", dropless(1, MoeRouter::Sinkhorn), false},
      {"dropless sinkhorn k=2 evaluation", dropless(2, MoeRouter::Sinkhorn), false},
      {"top-1 dropping, first come", deepspeed(1, true, false), true},
      {"top-1 dropping, random token selection", deepspeed(1, true, true), true},
      {"top-1 dropping, RSample", deepspeed(1, true, true, NoisyGate::RSample), true},
      {"top-1 no dropping", deepspeed(1, false, true), true},
      {"top-1 evaluation capacity", deepspeed(1, true, true), false},
      {"top-2 dropping, sampled second", deepspeed(2, true, true), true},
      {"top-2 no dropping", deepspeed(2, false, true), true},
      {"top-2 evaluation", deepspeed(2, true, true), false},
  };
  const size_t T = 24, E = 4;
  const std::vector<uint64_t> sampleIds = {77};
  const moe::RoutingNoise noise(&sampleIds, 3, T);
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const Case& c = cases[ci];
    DYNAMIC_SECTION(c.name) {
      std::mt19937 rng(static_cast<unsigned>(5 + ci));
      std::normal_distribution<float> normal(0.0f, 1.5f);
      const size_t k = static_cast<size_t>(c.config.topK);
      std::vector<float> logits(T * E), dWeight(T * k);
      for (float& v : logits) v = normal(rng);
      for (float& v : dWeight) v = normal(rng);
      const double auxGrad = 0.3;
      Json in = {{"tokens", T},        {"experts", E},       {"k", k},
                 {"logits", logits},   {"dweight", dWeight}, {"training", c.training},
                 {"aux_grad", auxGrad}};
      moe::Routing r;
      if (c.config.kind == MoeKind::Dropless) {
        in["kind"] = "dropless";
        in["router"] = moeRouterName(c.config.router);
        r = moe::routeDropless(logits.data(), T, E, c.config.topK, c.config.router, c.training);
      } else {
        moe::GateOptions o;
        o.k = c.config.topK;
        o.capacityFactor = c.training ? c.config.trainCapacityFactor : c.config.evalCapacityFactor;
        o.minCapacity = c.config.minCapacity;
        o.dropTokens = c.config.tokenDropping;
        o.useRts = c.config.useRts;
        o.rsample = c.config.noisyGate == NoisyGate::RSample;
        in["kind"] = "deepspeed";
        in["capacity_factor"] = o.capacityFactor;
        in["min_capacity"] = o.minCapacity;
        in["drop_tokens"] = o.dropTokens;
        // The draws the C++ side makes, handed to the reference.
        auto draws = [&](moe::RoutingNoise::Site site, bool gumbel) {
          std::vector<float> v(T * E);
          for (size_t t = 0; t < T; ++t)
            for (size_t e = 0; e < E; ++e)
              v[t * E + e] = gumbel ? noise.gumbel(t, site, e, E) : noise.uniform(t, site, e, E);
          return v;
        };
        if (c.training && k == 1 && o.dropTokens && o.useRts)
          in["rts"] = draws(moe::RoutingNoise::kRts, false);
        if (c.training && o.rsample) in["rsample"] = draws(moe::RoutingNoise::kRSample, true);
        if (c.training && k == 2) in["second"] = draws(moe::RoutingNoise::kSecondExpert, true);
        r = moe::gateDeepSpeed(logits.data(), T, E, o, c.training ? &noise : nullptr);
      }
      std::vector<float> dLogits(T * E);
      moe::routingBackward(r, c.config, dWeight.data(), auxGrad, dLogits.data());
      const Json ref = runReference(in);
      CHECK(r.capacity == ref["capacity"].get<size_t>());
      CHECK(r.dropped == ref["dropped"].get<size_t>());
      // The dropping cases overflow (so that dropping is what they test).
      if (c.config.tokenDropping && c.training) CHECK(r.dropped > 0);
      CHECK(r.auxLoss == Approx(ref["l_aux"].get<double>()).epsilon(1e-6).margin(1e-12));
      for (size_t e = 0; e < E; ++e) CHECK(r.counts[e] == ref["counts"][e].get<uint32_t>());
      for (size_t i = 0; i < T * k; ++i) {
        INFO("choice " << i);
        CHECK(r.expert[i] == ref["experts"][i].get<int32_t>());
        CHECK(r.weight[i] == Approx(ref["weights"][i].get<double>()).margin(1e-6));
      }
      double scale = 0.0, worst = 0.0;
      for (size_t i = 0; i < T * E; ++i) {
        const double want = ref["dlogits"][i].get<double>();
        scale = std::max(scale, std::fabs(want));
        worst = std::max(worst, std::fabs(dLogits[i] - want));
      }
      INFO("largest |d logits| " << scale << ", largest difference " << worst);
      CHECK(scale > 0.0);
      CHECK(worst <= 1e-5 * scale + 1e-9);
    }
  }
}

TEST_CASE("MoE config: the keys' limits are refused by name", "[moe]") {
  GptConfig c;
  c.numLayers = 4;
  c.moe.numExperts = 8;
  CHECK_NOTHROW(c.validate());
  auto refused = [&](GptConfig bad, const std::string& start) {
    try {
      bad.validate();
      FAIL("accepted: " << start);
    } catch (const ds::Error& e) {
      CHECK_THAT(e.what(), Catch::StartsWith(start));
    }
  };
  GptConfig k = c;
  k.moe.topK = 9;
  refused(k, "moe-top-k: expected 1..8");
  GptConfig interval = c;
  interval.moe.expertInterval = 5;
  refused(interval, "moe-expert-interval: expected 1..4");
  GptConfig gated = c;
  gated.activation = Activation::Swiglu;
  refused(gated, "activation: NeoX's dropless experts");
  GptConfig deep = c;
  deep.moe.kind = MoeKind::DeepSpeed;
  deep.activation = Activation::Swiglu;
  CHECK_NOTHROW(deep.validate());  // DeepSpeed's experts are the dense MLP, gate included
  deep.moe.topK = 3;
  refused(deep, "moe-top-k: 3: DeepSpeed-MoE's gating");
  GptConfig rsample = c;
  rsample.moe.kind = MoeKind::DeepSpeed;
  rsample.moe.topK = 2;
  rsample.moe.noisyGate = NoisyGate::RSample;
  refused(rsample, "moe-noisy-gate-policy: RSample");
  GptConfig ep = c;
  ep.moe.expertParallelSize = 2;
  refused(ep,
          "moe-expert-parallel-size: 2: NeoX's dropless MoE splits its experts over the "
          "model-parallel ranks");
  ep.moe.kind = MoeKind::DeepSpeed;
  CHECK_NOTHROW(ep.validate());
  ep.moe.expertParallelSize = 3;
  refused(ep, "moe-expert-parallel-size: 3 does not divide moe-num-experts 8");
  // Over model ranks the experts split evenly, and not over an expert-parallel group as well.
  CHECK_NOTHROW(c.validateModelParallel(2));
  CHECK_THROWS_WITH(c.validateModelParallel(3),
                    Catch::StartsWith("moe-num-experts: 8 experts do not split evenly over "
                                      "model-parallel-size 3"));
  GptConfig deepspeed = c;
  deepspeed.moe.kind = MoeKind::DeepSpeed;
  CHECK_NOTHROW(deepspeed.validateModelParallel(2));
  deepspeed.moe.expertParallelSize = 4;  // 8 experts: 4 per model rank, 1 per ep rank
  CHECK_NOTHROW(deepspeed.validateModelParallel(2));
  deepspeed.moe.expertParallelSize = 8;
  CHECK_THROWS_WITH(deepspeed.validateModelParallel(2),
                    Catch::StartsWith("moe-expert-parallel-size 8 with model-parallel-size 2: 8 "
                                      "experts do not split evenly over 16 ranks"));
  // Layers 0, 2 of 4 with interval 2; the default interval makes every layer MoE.
  GptConfig every2 = c;
  every2.moe.expertInterval = 2;
  CHECK(every2.moe.isMoeLayer(0));
  CHECK(!every2.moe.isMoeLayer(1));
  CHECK(every2.moe.isMoeLayer(2));
  CHECK(every2.moe.moeLayers(4) == 2);
  CHECK(c.moe.moeLayers(4) == 4);
  // NeoX's dropless expert width: 4 x hidden rounded up to 256; DeepSpeed's: the dense MLP's.
  c.hiddenSize = 72;
  c.numAttentionHeads = 4;
  CHECK(c.expertFfnSize() == 512);
  c.moe.kind = MoeKind::DeepSpeed;
  CHECK(c.expertFfnSize() == c.ffnSize());
}
