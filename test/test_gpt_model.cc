// The GPT model's loss and every parameter's gradient against an independent PyTorch
// implementation (test/reference/gpt_reference.py, float64) on the same weights and batch, for
// each position embedding, norm, activation, residual style and tied/untied output; plus what
// PyTorch cannot tell us: activation checkpointing changes nothing, dropout masks are a function
// of the sample only, and bad batches are refused by name.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "common/error.h"
#include "runtime/config/gpt_job_memory.h"
#include "runtime/model/flat_parameters.h"
#include "runtime/model/gpt.h"
#include "runtime/model/moe_routing.h"
#include "test/scratch_dir.h"
#include "test/skip.h"
#include "test/torch_python.h"
#include "test/small_gpt.h"

using ds::runtime::Activation;
using ds::runtime::Batch;
using ds::runtime::FlatParameters;
using ds::runtime::Gpt;
using ds::runtime::GptConfig;
using ds::runtime::InitMethod;
using ds::runtime::NormKind;
using ds::runtime::PositionEmbedding;
using Json = nlohmann::json;

namespace {

using ds::test::torchAvailable;
std::string python() { return ds::test::torchPython(); }

using ds::test::randomBatch;
using ds::test::smallConfig;

struct Reference {
  double loss;
  std::vector<float> grads;
};

// The MoE layers' flavour and gating as the reference takes them (a training pass).
Json moeSpec(const GptConfig& c) {
  const ds::runtime::MoeConfig& m = c.moe;
  Json layers = Json::array();
  for (int l = 0; l < c.numLayers; ++l)
    if (m.isMoeLayer(l)) layers.push_back(l);
  return {{"layers", layers},
          {"experts", m.numExperts},
          {"k", m.topK},
          {"kind", m.kind == ds::runtime::MoeKind::DeepSpeed ? "deepspeed" : "dropless"},
          {"router", ds::runtime::moeRouterName(m.router)},
          {"training", true},
          {"capacity_factor", m.trainCapacityFactor},
          {"min_capacity", m.minCapacity},
          {"drop_tokens", m.tokenDropping},
          {"loss_coeff", m.lossCoeff}};
}

// The random draws each MoE layer makes in a training pass over `batch` (the model's RoutingNoise
// of layer l + 1), by layer: jitter factors [N, h], RTS uniforms and Gumbel noise [N, experts].
Json moeDraws(const GptConfig& c, const Batch& batch) {
  using ds::runtime::moe::RoutingNoise;
  const ds::runtime::MoeConfig& m = c.moe;
  const size_t seq = batch.inputIds.size() / batch.size, N = batch.inputIds.size(),
               E = static_cast<size_t>(m.numExperts), h = static_cast<size_t>(c.hiddenSize);
  const bool deepspeed = m.kind == ds::runtime::MoeKind::DeepSpeed;
  const double jitter = deepspeed ? (m.noisyGate == ds::runtime::NoisyGate::Jitter ? 1e-2 : 0.0)
                                  : (m.router == ds::runtime::MoeRouter::TopK ? m.jitterEps : 0.0);
  Json out = Json::object();
  for (int l = 0; l < c.numLayers; ++l) {
    if (!m.isMoeLayer(l)) continue;
    const RoutingNoise noise(&batch.sampleIds, static_cast<uint64_t>(l + 1), seq);
    Json draws = Json::object();
    auto grid = [&](RoutingNoise::Site site, size_t width, bool gumbel) {
      std::vector<double> v(N * width);
      for (size_t t = 0; t < N; ++t)
        for (size_t e = 0; e < width; ++e)
          v[t * width + e] =
              gumbel ? noise.gumbel(t, site, e, width) : noise.uniform(t, site, e, width);
      return v;
    };
    if (jitter > 0) {
      std::vector<double> u = grid(RoutingNoise::kJitter, h, false);
      for (double& f : u) f = static_cast<float>(1.0 - jitter + 2.0 * jitter * f);
      draws["jitter"] = u;
    }
    if (deepspeed && m.topK == 1 && m.tokenDropping && m.useRts)
      draws["rts"] = grid(RoutingNoise::kRts, E, false);
    if (deepspeed && m.noisyGate == ds::runtime::NoisyGate::RSample)
      draws["rsample"] = grid(RoutingNoise::kRSample, E, true);
    if (deepspeed && m.topK == 2) draws["second"] = grid(RoutingNoise::kSecondExpert, E, true);
    out[std::to_string(l)] = draws;
  }
  return out;
}

Reference runTorch(const Gpt& model, const std::vector<float>& params, const Batch& batch) {
  const GptConfig& c = model.config();
  const std::filesystem::path dir = ds::test::makeScratchDir("gpt-torch");
  Json spec;
  spec["config"] = {{"hidden", c.hiddenSize},
                    {"heads", c.numAttentionHeads},
                    {"layers", c.numLayers},
                    {"norm", ds::runtime::normName(c.norm)},
                    {"layernorm_eps", c.layernormEpsilon},
                    {"rms_eps", c.rmsNormEpsilon},
                    {"scalenorm_eps", c.scalenormEpsilon},
                    {"kv_heads", c.kvHeads()},
                    {"pos_emb", ds::runtime::positionEmbeddingName(c.posEmb)},
                    {"rotary_dim", c.rotaryDim()},
                    {"rotary_base", c.rotaryEmbBase},
                    {"activation", ds::runtime::activationName(c.activation)},
                    {"gptj_residual", c.gptjResidual},
                    {"gptj_tied", c.gptjTied},
                    {"qk_norm", c.qkNorm},
                    {"tied", c.weightTying}};
  if (c.slidingWindowWidth >= 0) spec["config"]["sliding_window"] = c.slidingWindowWidth;
  if (c.moe.enabled()) {
    spec["config"]["moe"] = moeSpec(c);
    spec["moe_draws"] = moeDraws(c, batch);
  }
  for (const auto& p : model.parameters())
    spec["parameters"].push_back(
        {{"name", p.name}, {"shape", p.shape}, {"offset", p.offset}, {"numel", p.numel}});
  spec["samples"] = batch.size;
  spec["seq"] = batch.inputIds.size() / batch.size;
  spec["input_ids"] = batch.inputIds;
  spec["target_ids"] = batch.targetIds;
  std::ofstream(dir / "spec.json") << spec.dump();
  std::ofstream(dir / "params.bin", std::ios::binary)
      .write(reinterpret_cast<const char*>(params.data()),
             static_cast<std::streamsize>(params.size() * sizeof(float)));
  const std::string cmd = python() + " " DS_SOURCE_DIR "/test/reference/gpt_reference.py " +
                          (dir / "spec.json").string() + " " + (dir / "params.bin").string() +
                          " " + (dir / "grads.bin").string() + " 2>" + (dir / "err").string();
  FILE* pipe = popen(cmd.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string out;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) out.append(buffer, n);
  const int status = pclose(pipe);
  std::ifstream errFile(dir / "err");
  INFO(cmd << "\n" << std::string(std::istreambuf_iterator<char>(errFile), {}));
  REQUIRE(status == 0);
  Reference r;
  r.loss = Json::parse(out)["loss"].get<double>();
  r.grads.resize(params.size());
  std::ifstream(dir / "grads.bin", std::ios::binary)
      .read(reinterpret_cast<char*>(r.grads.data()),
            static_cast<std::streamsize>(r.grads.size() * sizeof(float)));
  return r;
}

// The model's loss and gradients on one batch against the float64 reference's.
// `masked`: these target positions are set to NeoX's label -100 (out of the loss).
void compareWithTorch(const GptConfig& c, const std::vector<size_t>& masked = {}) {
  Gpt model(c);
  std::vector<float> params(model.parameterCount());
  model.initParameters(params.data(), 7);
  Batch batch = randomBatch(c, 3, 10, 11);  // shorter than seq-length: allowed
  for (size_t i : masked) batch.targetIds.at(i) = -100;
  FlatParameters access(model, params.data());
  const float gradScale = 4.0f;  // gradients carry it, the loss does not
  const float loss = model.forwardBackward(batch, access, gradScale);
  const Reference ref = runTorch(model, params, batch);
  CHECK(loss == Approx(ref.loss).epsilon(1e-5));
  for (const auto& p : model.parameters()) {
    if (c.gptjTied && p.name.find("post_attention_layernorm") != std::string::npos) {
      // NeoX keeps the second norm of a tied gpt-j block, unused: no gradient reaches it.
      for (size_t i = p.offset; i < p.offset + p.numel; ++i) {
        INFO(p.name);
        CHECK(ref.grads[i] == 0.0f);
        CHECK(access.gradients()[i] == 0.0f);
      }
      continue;
    }
    double worst = 0.0, scale = 0.0;
    for (size_t i = p.offset; i < p.offset + p.numel; ++i) {
      scale = std::max(scale, std::fabs(static_cast<double>(ref.grads[i])));
      worst = std::max(
          worst, std::fabs(static_cast<double>(access.gradients()[i]) / gradScale - ref.grads[i]));
    }
    INFO(p.name << ": largest |gradient| " << scale << ", largest difference " << worst);
    // An expert no token reached has no gradient, here and in the reference alike.
    if (p.name.find(".experts.") == std::string::npos) CHECK(scale > 0.0);
    CHECK(worst <= 1e-5 * scale + 1e-8);  // fp32 rounding: about 1e-6 seen
  }
}

}  // namespace

TEST_CASE("GPT: loss and every gradient equal PyTorch's for each architecture option",
          "[gpt][torch]") {
  if (ds::test::skipUnless(torchAvailable(), python() + " cannot import torch; install "
                                                        "python3-torch (scripts/setup --test)"))
    return;
  struct Case {
    const char* name;
    PositionEmbedding pos;
    NormKind norm;
    Activation act;
    bool tied, gptj;
    double rotaryPct;
  };
  const Case cases[] = {
      {"learned, layernorm, gelu, tied", PositionEmbedding::Learned, NormKind::LayerNorm,
       Activation::Gelu, true, false, 1.0},
      {"rotary 50%, rmsnorm, geglu, untied", PositionEmbedding::Rotary, NormKind::RmsNorm,
       Activation::Geglu, false, false, 0.5},
      {"rotary 100%, layernorm, geglu, tied, gpt-j", PositionEmbedding::Rotary,
       NormKind::LayerNorm, Activation::Geglu, true, true, 1.0},
      {"sinusoidal, layernorm, gelu, untied, gpt-j", PositionEmbedding::Sinusoidal,
       NormKind::LayerNorm, Activation::Gelu, false, true, 1.0},
      {"no positions, rmsnorm, gelu, tied", PositionEmbedding::None, NormKind::RmsNorm,
       Activation::Gelu, true, false, 1.0},
  };
  for (const Case& k : cases) {
    DYNAMIC_SECTION(k.name) {
      GptConfig c = smallConfig();
      c.posEmb = k.pos;
      c.norm = k.norm;
      c.activation = k.act;
      c.weightTying = k.tied;
      c.gptjResidual = k.gptj;
      c.rotaryPct = k.rotaryPct;
      compareWithTorch(c);
    }
  }
}

TEST_CASE("GPT: with MoE layers the loss and every gradient equal PyTorch's, each flavour",
          "[gpt][torch][moe]") {
  if (ds::test::skipUnless(torchAvailable(), python() + " cannot import torch; install "
                                                        "python3-torch (scripts/setup --test)"))
    return;
  using ds::runtime::MoeKind;
  using ds::runtime::MoeRouter;
  using ds::runtime::NoisyGate;
  struct Case {
    const char* name;
    MoeKind kind;
    int k, interval;
    MoeRouter router;
    double jitter;
    bool drop, rts, residual;
    NoisyGate noisy;
    Activation act;
  };
  const Case cases[] = {
      {"dropless sinkhorn top-1, every layer", MoeKind::Dropless, 1, 1, MoeRouter::Sinkhorn, 0,
       false, false, false, NoisyGate::None, Activation::Gelu},
      {"dropless sinkhorn top-2, every 2nd layer", MoeKind::Dropless, 2, 2, MoeRouter::Sinkhorn, 0,
       false, false, false, NoisyGate::None, Activation::Relu},
      {"dropless topk top-2 with jitter", MoeKind::Dropless, 2, 1, MoeRouter::TopK, 0.1, false,
       false, false, NoisyGate::None, Activation::Silu},
      {"DeepSpeed top-1 dropping with RTS, residual", MoeKind::DeepSpeed, 1, 1, MoeRouter::Sinkhorn,
       0, true, true, true, NoisyGate::None, Activation::Gelu},
      {"DeepSpeed top-1 no dropping, RSample, no residual", MoeKind::DeepSpeed, 1, 1,
       MoeRouter::Sinkhorn, 0, false, true, false, NoisyGate::RSample, Activation::Gelu},
      {"DeepSpeed top-2 dropping, Jitter, swiglu experts", MoeKind::DeepSpeed, 2, 1,
       MoeRouter::Sinkhorn, 0, true, true, false, NoisyGate::Jitter, Activation::Swiglu},
  };
  for (const Case& k : cases) {
    DYNAMIC_SECTION(k.name) {
      GptConfig c = smallConfig();
      c.activation = k.act;
      c.moe.numExperts = 4;
      c.moe.kind = k.kind;
      c.moe.topK = k.k;
      c.moe.expertInterval = k.interval;
      c.moe.router = k.router;
      c.moe.jitterEps = k.jitter;
      c.moe.tokenDropping = k.drop;
      c.moe.useRts = k.rts;
      c.moe.useResidual = k.residual;
      c.moe.noisyGate = k.noisy;
      c.moe.trainCapacityFactor = 0.75;  // 30 tokens over 4 experts: some past capacity
      c.moe.lossCoeff = 0.5;
      if (c.gated()) c.intermediateSize = 96;  // NeoX's gated width: 2/3 of it, 64
      compareWithTorch(c);
    }
  }
}

TEST_CASE("GPT: with masked targets the loss and every gradient equal PyTorch's (NeoX's mean)",
          "[gpt][torch]") {
  if (ds::test::skipUnless(torchAvailable(), python() + " cannot import torch; install "
                                                        "python3-torch (scripts/setup --test)"))
    return;
  GptConfig c = smallConfig();
  SECTION("a few targets masked, in every sample") {
    compareWithTorch(c, {0, 3, 4, 11, 19, 20, 28, 29});
  }
  SECTION("all but three targets masked, untied rotary") {
    c.posEmb = PositionEmbedding::Rotary;
    c.weightTying = false;
    std::vector<size_t> masked;
    for (size_t i = 0; i < 30; ++i)
      if (i != 2 && i != 15 && i != 27) masked.push_back(i);
    compareWithTorch(c, masked);
  }
}

TEST_CASE("GPT: a masked target adds no loss and no gradient and the mean is over the rest",
          "[gpt]") {
  GptConfig c = smallConfig();
  Gpt model(c);
  std::vector<float> params(model.parameterCount());
  model.initParameters(params.data(), 3);
  const Batch plain = randomBatch(c, 2, 8, 5);
  FlatParameters a(model, params.data());
  const float plainLoss = model.forwardBackward(plain, a, 1.0f);
  // The same batch, but position 5's target is masked.
  Batch masked = plain;
  masked.targetIds[5] = -100;
  FlatParameters b(model, params.data());
  const float maskedLoss = model.forwardBackward(masked, b, 1.0f);
  CHECK(maskedLoss != plainLoss);
  // Masking a target is the same as leaving out its loss term: the loss over the 15 counted
  // targets, scaled to 16, plus the masked one's term, is the 16-target mean.
  Batch only = plain;
  for (size_t i = 0; i < only.targetIds.size(); ++i)
    if (i != 5) only.targetIds[i] = -1;
  FlatParameters o(model, params.data());
  const float onlyLoss = model.forwardBackward(only, o, 1.0f);
  CHECK((maskedLoss * 15.0 + onlyLoss) / 16.0 == Approx(plainLoss).epsilon(1e-5));
  CHECK(model.evaluate(masked, b) == maskedLoss);
  // Every target masked: no loss, no gradient (NeoX's 0 / 0 would be NaN).
  Batch none = plain;
  std::fill(none.targetIds.begin(), none.targetIds.end(), -100);
  FlatParameters z(model, params.data());
  CHECK(model.forwardBackward(none, z, 1.0f) == 0.0f);
  for (size_t i = 0; i < model.parameterCount(); ++i) REQUIRE(z.gradients()[i] == 0.0f);
}

TEST_CASE("GPT: loss and every gradient equal PyTorch's for the LLaMA family's options",
          "[gpt][torch]") {
  if (ds::test::skipUnless(torchAvailable(), python() + " cannot import torch; install "
                                                        "python3-torch (scripts/setup --test)"))
    return;
  // smallConfig: hidden 32, 4 heads. Gated widths (gpt_config.cc): 4h = 128 gives int(2/3) = 85,
  // odd, which NeoX cannot build; each gated case picks intermediate-size or mlp-multiple-of.
  struct Case {
    const char* name;
    void (*apply)(GptConfig&);
  };
  const Case cases[] = {
      {"scalenorm, gelu", [](GptConfig& c) { c.norm = NormKind::ScaleNorm; }},
      {"scalenorm, eps 3 (clamped rows), rotary",
       [](GptConfig& c) {
         c.norm = NormKind::ScaleNorm;
         c.scalenormEpsilon = 3.0;
         c.posEmb = PositionEmbedding::Rotary;
       }},
      {"layernorm without bias", [](GptConfig& c) { c.biasInNorms = false; }},
      {"relu, untied",
       [](GptConfig& c) {
         c.activation = Activation::Relu;
         c.weightTying = false;
       }},
      {"silu, gpt-j",
       [](GptConfig& c) {
         c.activation = Activation::Silu;
         c.gptjResidual = true;
       }},
      {"reglu, intermediate-size 96 (64 -> 32)",
       [](GptConfig& c) {
         c.activation = Activation::Reglu;
         c.intermediateSize = 96;
       }},
      {"swiglu, mlp-multiple-of 16 (96 -> 48)",
       [](GptConfig& c) {
         c.activation = Activation::Swiglu;
         c.mlpMultipleOf = 16;
       }},
      {"glu, mlp-multiple-of 8",
       [](GptConfig& c) {
         c.activation = Activation::Glu;
         c.mlpMultipleOf = 8;
       }},
      {"bilinear, intermediate-size 48",
       [](GptConfig& c) {
         c.activation = Activation::Bilinear;
         c.intermediateSize = 48;
       }},
      {"geglu, intermediate-size 96 (NeoX's 2/3 sizing)",
       [](GptConfig& c) {
         c.activation = Activation::Geglu;
         c.intermediateSize = 96;
       }},
      {"no attention or MLP biases",
       [](GptConfig& c) {
         c.biasInAttnLinear = false;
         c.biasInMlp = false;
       }},
      {"grouped-query: 2 kv heads, rotary base 500",
       [](GptConfig& c) {
         c.numKvHeads = 2;
         c.posEmb = PositionEmbedding::Rotary;
         c.rotaryEmbBase = 500.0;
       }},
      {"multi-query: 1 kv head, rotary 50%",
       [](GptConfig& c) {
         c.numKvHeads = 1;
         c.posEmb = PositionEmbedding::Rotary;
         c.rotaryPct = 0.5;
       }},
      // LLaMA's block scaled down: NeoX's LLaMA configs' keys (rmsnorm, swiglu, intermediate-size
      // 8h with mlp-multiple-of, rotary over whole heads, grouped-query, no biases, untied).
      {"LLaMA-shaped: rmsnorm, swiglu 8h / multiple-of 8, 2 kv heads, rotary, no biases",
       [](GptConfig& c) {
         c.norm = NormKind::RmsNorm;
         c.rmsNormEpsilon = 1e-6;
         c.activation = Activation::Swiglu;
         c.intermediateSize = 256;  // int(256 * 2 / 3) = 170 -> 176 outputs, 85 -> 88 inputs
         c.mlpMultipleOf = 8;
         c.numKvHeads = 2;
         c.posEmb = PositionEmbedding::Rotary;
         c.rotaryEmbBase = 500000.0;
         c.biasInNorms = false;
         c.biasInAttnLinear = false;
         c.biasInMlp = false;
         c.weightTying = false;
       }},
  };
  for (const Case& k : cases) {
    DYNAMIC_SECTION(k.name) {
      GptConfig c = smallConfig();
      k.apply(c);
      compareWithTorch(c);
    }
  }
}

TEST_CASE("GPT: loss and every gradient equal PyTorch's for NeoX's attention and MLP options",
          "[gpt][torch]") {
  if (ds::test::skipUnless(torchAvailable(), python() + " cannot import torch; install "
                                                        "python3-torch (scripts/setup --test)"))
    return;
  // The batch has 10 positions: windows of 0 (each token alone), 3 and 4 hide keys from most
  // queries, so a window off by one (i - W + 1..i) changes the loss.
  struct Case {
    const char* name;
    void (*apply)(GptConfig&);
  };
  const Case cases[] = {
      {"sliding window 3, rotary",
       [](GptConfig& c) {
         c.slidingWindowWidth = 3;
         c.posEmb = PositionEmbedding::Rotary;
       }},
      {"sliding window 0 (each query sees itself only)",
       [](GptConfig& c) { c.slidingWindowWidth = 0; }},
      {"qk layernorm (over whole queries), learned positions",
       [](GptConfig& c) { c.qkNorm = true; }},
      {"qk rmsnorm (per head), rotary 50%",
       [](GptConfig& c) {
         c.qkNorm = true;
         c.norm = NormKind::RmsNorm;
         c.posEmb = PositionEmbedding::Rotary;
         c.rotaryPct = 0.5;
       }},
      {"qk scalenorm (per head, one gain)",
       [](GptConfig& c) {
         c.qkNorm = true;
         c.norm = NormKind::ScaleNorm;
       }},
      {"softsign", [](GptConfig& c) { c.activation = Activation::Softsign; }},
      {"mish, untied",
       [](GptConfig& c) {
         c.activation = Activation::Mish;
         c.weightTying = false;
       }},
      {"gpt-j residual with tied norms",
       [](GptConfig& c) {
         c.gptjResidual = true;
         c.gptjTied = true;
       }},
      {"expansion-factor 2.5 (80 wide), relu",
       [](GptConfig& c) {
         c.expansionFactor = 2.5;
         c.activation = Activation::Relu;
       }},
      // Mistral's block scaled down (configs/mistral/7B.yml): LLaMA's plus a sliding window.
      {"Mistral-shaped: rmsnorm, swiglu, 2 kv heads, rotary, window 4, no biases",
       [](GptConfig& c) {
         c.norm = NormKind::RmsNorm;
         c.activation = Activation::Swiglu;
         c.intermediateSize = 96;
         c.numKvHeads = 2;
         c.posEmb = PositionEmbedding::Rotary;
         c.slidingWindowWidth = 4;
         c.biasInNorms = c.biasInAttnLinear = c.biasInMlp = false;
         c.weightTying = false;
       }},
  };
  for (const Case& k : cases) {
    DYNAMIC_SECTION(k.name) {
      GptConfig c = smallConfig();
      k.apply(c);
      compareWithTorch(c);
    }
  }
}

TEST_CASE("GPT: activation checkpointing gives bitwise the same loss and gradients", "[gpt]") {
  for (bool dropout : {false, true}) {
    GptConfig c = smallConfig();
    c.posEmb = PositionEmbedding::Rotary;
    if (dropout) c.attentionDropout = c.hiddenDropout = 0.1;
    Gpt plain(c);
    c.checkpointActivations = true;
    Gpt recomputing(c);
    std::vector<float> params(plain.parameterCount());
    plain.initParameters(params.data(), 3);
    const Batch batch = randomBatch(c, 4, 12, 5);
    FlatParameters a(plain, params.data()), b(recomputing, params.data());
    CHECK(plain.forwardBackward(batch, a, 1.0f) == recomputing.forwardBackward(batch, b, 1.0f));
    CHECK(a.gradients() == b.gradients());
    CHECK(recomputing.peakActivationBytes() < plain.peakActivationBytes());
  }
}

TEST_CASE("GPT: a training step's activation memory grows linearly with the sequence (flash "
          "attention keeps no [T, T] probabilities)",
          "[gpt][attention]") {
  GptConfig c = smallConfig();
  c.maxPositionEmbeddings = 2048;
  c.attentionDropout = 0.1;
  auto peakAt = [&](size_t seq) {
    Gpt model(c);
    std::vector<float> params(model.parameterCount());
    model.initParameters(params.data(), 3);
    FlatParameters access(model, params.data());
    const float loss = model.forwardBackward(randomBatch(c, 1, seq, 5), access, 1.0f);
    CHECK(std::isfinite(loss));
    return static_cast<double>(model.peakActivationBytes());
  };
  const double at512 = peakAt(512), at2048 = peakAt(2048);
  INFO("peak activation bytes: " << at512 << " at seq 512, " << at2048 << " at seq 2048");
  // 4 heads x T^2 floats a layer would be 8x the rest at seq 2048 and make the ratio about 13.
  CHECK(at2048 / at512 < 4.2);
  CHECK(at2048 / at512 > 3.8);
}

TEST_CASE("GPT: an evaluation keeps only the block in hand: its measured and predicted peak never "
          "exceed a training step's of the same micro-batch",
          "[gpt]") {
  struct Case {
    const char* name;
    std::function<void(GptConfig&)> apply;
  };
  const std::vector<Case> cases = {
      {"plain", [](GptConfig&) {}},
      {"one layer", [](GptConfig& c) { c.numLayers = 1; }},
      {"checkpointing, 3 layers",
       [](GptConfig& c) {
         c.numLayers = 3;
         c.checkpointActivations = true;
       }},
      {"grouped-query, swiglu, rotary",
       [](GptConfig& c) {
         c.numKvHeads = 2;
         c.activation = Activation::Swiglu;
         c.intermediateSize = 96;
         c.posEmb = PositionEmbedding::Rotary;
       }},
      {"qk norm, gpt-j residual", [](GptConfig& c) {
         c.qkNorm = true;
         c.gptjResidual = true;
       }},
  };
  for (const Case& k : cases) {
    INFO(k.name);
    GptConfig c = smallConfig();
    k.apply(c);
    Gpt evaluating(c), training(c);
    std::vector<float> params(training.parameterCount());
    training.initParameters(params.data(), 3);
    const Batch batch = randomBatch(c, 4, 12, 5);
    FlatParameters a(evaluating, params.data()), b(training, params.data());
    const float evalLoss = evaluating.evaluate(batch, a);
    CHECK(evalLoss == training.forwardBackward(batch, b, 1.0f));  // the same forward
    CHECK(evaluating.peakActivationBytes() > 0);
    CHECK(evaluating.peakActivationBytes() <= training.peakActivationBytes());
    if (c.numLayers > 1)  // a training step keeps every block (or every block's input)
      CHECK(evaluating.peakActivationBytes() < training.peakActivationBytes());
    // A second evaluation still computes the same loss from the freed buffers.
    CHECK(evaluating.evaluate(batch, a) == evalLoss);

    ds::runtime::GptTrainConfig job;
    job.model = c;
    job.model.seqLength = 12;
    const auto predicted = ds::runtime::estimateGptJobMemory(job, ds::runtime::BatchConfig{64, 4, 16});
    CHECK(predicted.evalActivations > 0);
    CHECK(predicted.evalActivations <= predicted.trainActivations);
  }
}

TEST_CASE("GPT: dropout masks depend on the sample, not on the batch it travels in", "[gpt]") {
  GptConfig c = smallConfig();
  c.attentionDropout = 0.2;
  c.hiddenDropout = 0.3;
  Gpt model(c);
  std::vector<float> params(model.parameterCount());
  model.initParameters(params.data(), 9);
  const Batch both = randomBatch(c, 2, 8, 21);
  Batch first = both, second = both;  // the same two samples, one per batch
  first.size = second.size = 1;
  first.inputIds.resize(8);
  first.targetIds.resize(8);
  first.sampleIds.resize(1);
  second.inputIds.erase(second.inputIds.begin(), second.inputIds.begin() + 8);
  second.targetIds.erase(second.targetIds.begin(), second.targetIds.begin() + 8);
  second.sampleIds.erase(second.sampleIds.begin());
  FlatParameters together(model, params.data()), apart(model, params.data());
  const float lossBoth = model.forwardBackward(both, together, 1.0f);
  const float l1 = model.forwardBackward(first, apart, 0.5f);
  const float l2 = model.forwardBackward(second, apart, 0.5f);
  CHECK(lossBoth == Approx((l1 + l2) / 2).epsilon(1e-6));
  for (size_t i = 0; i < params.size(); ++i)
    REQUIRE(together.gradients()[i] == Approx(apart.gradients()[i]).margin(1e-6));

  // Dropout is on in training: the loss differs from evaluation's, which has none.
  FlatParameters access(model, params.data());
  CHECK(model.forwardBackward(both, access, 1.0f) != model.evaluate(both, access));

  // And the gradient is the loss's derivative with the masks in place: a directional check.
  std::mt19937_64 rng(4);
  std::vector<float> direction(params.size());
  double predicted = 0.0;
  for (size_t i = 0; i < params.size(); ++i) {
    direction[i] = (rng() % 2 ? 1.0f : -1.0f);
    predicted += direction[i] * together.gradients()[i];
  }
  const float eps = 1e-3f;
  auto lossAt = [&](float t) {
    std::vector<float> moved = params;
    for (size_t i = 0; i < moved.size(); ++i) moved[i] += t * direction[i];
    FlatParameters at(model, moved.data());
    return static_cast<double>(model.forwardBackward(both, at, 1.0f));
  };
  const double measured = (lossAt(eps) - lossAt(-eps)) / (2 * eps);
  CHECK(measured == Approx(predicted).epsilon(0.03));
}

TEST_CASE("GPT: bad batches and configurations are refused by name", "[gpt]") {
  GptConfig c = smallConfig();
  Gpt model(c);
  std::vector<float> params(model.parameterCount());
  model.initParameters(params.data(), 1);
  FlatParameters access(model, params.data());
  Batch b = randomBatch(c, 2, 8, 1);
  b.inputIds[3] = c.vocabSize;
  CHECK_THROWS_WITH(model.forwardBackward(b, access, 1.0f),
                    Catch::Contains("token id 50 is outside the vocabulary"));
  b = randomBatch(c, 2, 20, 1);
  CHECK_THROWS_WITH(model.forwardBackward(b, access, 1.0f), Catch::Contains("exceed"));
  b = randomBatch(c, 2, 8, 1);
  b.targetIds.pop_back();
  CHECK_THROWS_WITH(model.forwardBackward(b, access, 1.0f), Catch::Contains("targets"));
  b = randomBatch(c, 2, 8, 1);
  b.targetIds[2] = c.vocabSize;
  CHECK_THROWS_WITH(model.forwardBackward(b, access, 1.0f),
                    Catch::Contains("target id 50 is outside the vocabulary"));

  GptConfig bad = smallConfig();
  bad.numAttentionHeads = 5;
  CHECK_THROWS_WITH(Gpt(bad), Catch::Contains("num-attention-heads: 5 does not divide"));
  bad = smallConfig();
  bad.seqLength = 40;
  CHECK_THROWS_WITH(Gpt(bad), Catch::Contains("max-position-embeddings"));
  bad = smallConfig();
  bad.hiddenDropout = 1.0;
  CHECK_THROWS_WITH(Gpt(bad), Catch::Contains("hidden-dropout"));
  bad = smallConfig();
  bad.numLayers = bad.hiddenSize = bad.numAttentionHeads = 1 << 20;
  CHECK_THROWS_WITH(Gpt(bad), Catch::Contains("this trainer holds at most 1e12"));
}

TEST_CASE("GPT: padded vocabulary, parameter table and initialisation follow NeoX", "[gpt]") {
  GptConfig c = smallConfig();
  c.vocabSize = 257;
  c.makeVocabSizeDivisibleBy = 128;
  Gpt model(c);
  CHECK(c.paddedVocabSize() == 384);
  const auto& specs = model.parameters();
  CHECK(specs.front().name == "embed.word_embeddings.weight");
  CHECK(specs.front().shape == std::vector<int64_t>{384, 32});
  CHECK(specs.back().name == "final_layer_norm.bias");  // tied: no embed_out
  CHECK(specs.back().layer == c.numLayers + 1);
  std::vector<float> a(model.parameterCount()), b(model.parameterCount());
  model.initParameters(a.data(), 5);
  model.initParameters(b.data(), 5);
  CHECK(a == b);
  // dense_4h_to_h uses scaled_normal: std / sqrt(2 * layers) = 0.2 / 2
  for (const auto& p : specs) {
    if (p.name != "layers.1.mlp.dense_4h_to_h.weight") continue;
    double sq = 0;
    for (size_t i = p.offset; i < p.offset + p.numel; ++i) sq += a[i] * a[i];
    CHECK(std::sqrt(sq / p.numel) == Approx(0.1).epsilon(0.05));
  }

  // NeoX's other init methods (init_functions.py), by the spread of a [4h, h] and a [h, 4h]
  // weight: std 0.2 over 2 layers, h = 32, fans 32 and 128.
  struct Init {
    InitMethod method;
    double std;     // the expected standard deviation
    double bound;   // xavier_uniform: no value beyond it; else 0
  };
  const double xavier = std::sqrt(2.0 / (32 + 128));
  const Init inits[] = {
      {InitMethod::SingleResidualScaledNormal, 0.2 / std::sqrt(2.0), 0},  // std / sqrt(layers)
      {InitMethod::ScaledNormal, 0.1, 0},
      {InitMethod::SmallInit, std::sqrt(2.0 / (5 * 32)), 0},
      {InitMethod::WangInit, 2.0 / 2 / std::sqrt(32.0), 0},
      {InitMethod::XavierNormal, xavier, 0},
      {InitMethod::XavierUniform, xavier, std::sqrt(6.0 / (32 + 128))},
  };
  for (const Init& k : inits) {
    INFO(ds::runtime::initMethodName(k.method));
    GptConfig ci = smallConfig();
    ci.initMethodStd = 0.2;
    ci.initMethod = ci.outputLayerInitMethod = k.method;
    Gpt m(ci);
    std::vector<float> v(m.parameterCount());
    m.initParameters(v.data(), 9);
    for (const auto& p : m.parameters()) {
      if (p.name != "layers.0.mlp.dense_h_to_4h.weight" &&
          p.name != "layers.1.mlp.dense_4h_to_h.weight")
        continue;
      double sq = 0, sum = 0, largest = 0;
      for (size_t i = p.offset; i < p.offset + p.numel; ++i) {
        sq += v[i] * v[i];
        sum += v[i];
        largest = std::max(largest, std::fabs(static_cast<double>(v[i])));
      }
      CHECK(std::sqrt(sq / p.numel) == Approx(k.std).epsilon(0.05));
      CHECK(std::fabs(sum / p.numel) < 0.1 * k.std);
      if (k.bound > 0) {
        CHECK(largest <= k.bound);
        CHECK(largest > 0.95 * k.bound);  // uniform: its edges are reached
      } else {
        CHECK(largest > 2.5 * k.std);  // normal: tails beyond a uniform's sqrt(3) std
      }
    }
  }
}

// The parameters drawn as the ranges [cuts[r], cuts[r + 1]) of the flat layout, each range cut
// further at the tensors it spans (as a rank would draw its ZeRO shard), then concatenated.
std::vector<float> drawInShards(const Gpt& model, uint64_t seed, const std::vector<size_t>& cuts) {
  std::vector<float> out(model.parameterCount(), -1.0f);
  for (size_t r = 0; r + 1 < cuts.size(); ++r)
    for (const auto& spec : model.parameters()) {
      const size_t begin = std::max(cuts[r], spec.offset),
                   end = std::min(cuts[r + 1], spec.offset + spec.numel);
      if (begin >= end) continue;
      std::vector<float> shard(end - begin);
      model.initTensorRange(spec, shard.data(), seed, begin - spec.offset, end - spec.offset);
      std::copy(shard.begin(), shard.end(), out.begin() + static_cast<std::ptrdiff_t>(begin));
    }
  return out;
}

TEST_CASE("GPT: parameters drawn in shards at world sizes 1 to 4 equal one whole draw", "[gpt]") {
  for (InitMethod method : {InitMethod::Normal, InitMethod::ScaledNormal, InitMethod::XavierUniform,
                            InitMethod::SmallInit}) {
    INFO(ds::runtime::initMethodName(method));
    GptConfig c = smallConfig();
    c.initMethod = method;
    const Gpt model(c);
    const size_t count = model.parameterCount();
    std::vector<float> whole(count);
    model.initParameters(whole.data(), 11);
    for (size_t world : {1, 2, 3, 4}) {
      INFO("world " << world);
      std::vector<size_t> even, uneven;
      for (size_t r = 0; r <= world; ++r) {
        even.push_back(count * r / world);
        // Odd cuts, off the tensors' and the Philox blocks' boundaries alike.
        uneven.push_back(r == world ? count : (count * r * r) / (world * world) + (r % 2) * 3);
      }
      CHECK(drawInShards(model, 11, even) == whole);
      CHECK(drawInShards(model, 11, uneven) == whole);
    }
  }
}

TEST_CASE("GPT: the flops profiler's module tree adds up and prints as DeepSpeed's", "[gpt]") {
  GptConfig c = smallConfig();
  c.activation = Activation::Geglu;
  Gpt model(c);
  std::vector<float> params(model.parameterCount());
  model.initParameters(params.data(), 2);
  FlatParameters access(model, params.data());
  model.setProfiling(true);
  model.forwardBackward(randomBatch(c, 3, 12, 1), access, 1.0f);
  model.setProfiling(false);
  const auto modules = model.profileModules(3, 12);
  const auto& root = modules.front();
  CHECK(root.params == static_cast<double>(model.parameterCount()));
  // The forward MACs counted independently, from the shapes (one MAC is one multiply-add; a Linear
  // of in x out inputs costs in * out per token; lookups, norms, activations, softmax, bias and
  // residual adds cost none). This config: h = 32, 2 layers, seq 12, 3 samples, ffn = 4h = 128,
  // GeGLU (dense_h_to_4h makes 2 * ffn = 256 outputs: gate and value), vocab 50 padded to 64.
  // Per token and layer:
  //   QKV projection           3 * h * h  = 3072
  //   scores Q K^T + P V       2 * seq * h = 768 (the full seq x seq matrix, as gpt.cc counts: the
  //                            causal upper half is computed and masked, not skipped)
  //   output projection        h * h       = 1024
  //   MLP in, MLP out          h * 2 ffn + ffn * h = 8192 + 4096
  // then the logits over the padded vocabulary: h * 64 = 2048 per token.
  const double perToken = 2 * (3072 + 768 + 1024 + 8192 + 4096) + 2048;  // 36352
  CHECK(root.macs == Approx(36 * perToken));                             // 3 samples x 12
  CHECK(model.forwardMacsPerSample(12).total() == Approx(12 * perToken));
  // The same count with GeLU (dense_h_to_4h makes ffn outputs) and a longer sequence.
  GptConfig gelu = smallConfig();
  gelu.activation = Activation::Gelu;
  CHECK(Gpt(gelu).forwardMacsPerSample(16).total() ==
        Approx(16 * (2 * (3072 + 2 * 16 * 32 + 1024 + 4096 + 4096) + 2048)));
  CHECK(root.forwardSeconds > 0.0);
  // Every parent's params and MACs are its children's sums (the root's include the embedding).
  std::vector<double> params_(modules.size()), macs(modules.size()), seconds(modules.size());
  std::vector<int> children(modules.size());
  for (size_t i = 1; i < modules.size(); ++i) {
    params_[modules[i].parent] += modules[i].params;
    macs[modules[i].parent] += modules[i].macs;
    seconds[modules[i].parent] += modules[i].forwardSeconds;
    ++children[modules[i].parent];
  }
  for (size_t i = 0; i < modules.size(); ++i) {
    if (!children[i]) continue;
    INFO(modules[i].name);
    CHECK(params_[i] == Approx(modules[i].params));
    CHECK(macs[i] == Approx(modules[i].macs));
    CHECK(seconds[i] <= modules[i].forwardSeconds * 1.0001 + 1e-6);  // parts within the whole
  }
  ds::runtime::ProfileSummary s;
  s.step = 1;
  s.batchPerRank = 3;
  s.trainBatchSize = 3;
  s.forwardSeconds = root.forwardSeconds;
  s.backwardSeconds = 2 * root.forwardSeconds;
  ds::runtime::FlopsProfilerConfig f;
  f.topModules = 2;
  f.moduleDepth = 2;
  const std::string text = ds::runtime::formatFlopsProfile(modules, s, f);
  CHECK_THAT(text, Catch::Contains("Profile Summary at step 1:") &&
                       Catch::Contains("params per gpu:                                               " +
                                       ds::runtime::withUnit(root.params)) &&
                       Catch::Contains("depth 2:") && !Catch::Contains("depth 3:") &&
                       Catch::Contains("(mlp): MLP(") && !Catch::Contains("dense_h_to_4h"));
  CHECK(ds::runtime::withUnit(512) == "512");
  CHECK(ds::runtime::withUnit(0, "MACs") == "0 MACs");
  CHECK(ds::runtime::withUnit(3.257856e6) == "3.26 M");
  CHECK(ds::runtime::latencyText(0.03074) == "30.74 ms");
}

TEST_CASE("GPT: LLaMA shapes give NeoX's MLP widths and hand-counted parameters and MACs",
          "[gpt]") {
  // NeoX's ParallelMLP sizing on real LLaMA configs (configs/llama/7B.yml, llama2/70B.yml): the
  // widths Hugging Face's LLaMA checkpoints have (11008 and 28672).
  GptConfig big;
  big.hiddenSize = 4096;
  big.numAttentionHeads = 32;
  big.activation = Activation::Swiglu;
  big.intermediateSize = 32768;
  big.mlpMultipleOf = 256;
  CHECK(big.ffnSize() == 11008);
  CHECK(big.ffnInputSize() == 2 * 11008);
  big.hiddenSize = 8192;
  big.numAttentionHeads = 64;
  big.intermediateSize = 86016;
  CHECK(big.ffnSize() == 28672);
  big.intermediateSize = 0;  // 4h = 32768: int(2/3) = 21845 -> 22016 outputs, 10922 -> 11008
  CHECK(big.ffnInputSize() == 22016);
  CHECK(big.ffnSize() == 11008);
  big.activation = Activation::Relu;  // ungated: 4h, a multiple of 512 already
  CHECK(big.ffnSize() == 4 * 8192);
  CHECK(big.ffnInputSize() == 4 * 8192);

  // A LLaMA-shaped small model, counted by hand: h = 32, 4 query heads of 8, 2 kv heads
  // (query_key_value makes 32 + 2 * 16 = 64 outputs), swiglu of intermediate-size 256 with
  // mlp-multiple-of 8 (176 outputs, 88 inputs), rmsnorm, no biases, untied, rotary, vocab 64.
  GptConfig c = smallConfig();
  c.norm = NormKind::RmsNorm;
  c.activation = Activation::Swiglu;
  c.intermediateSize = 256;
  c.mlpMultipleOf = 8;
  c.numKvHeads = 2;
  c.posEmb = PositionEmbedding::Rotary;
  c.biasInAttnLinear = c.biasInMlp = false;
  c.weightTying = false;
  Gpt llama(c);
  //   per layer: norms 2 * 32, qkv 64 * 32, dense 32 * 32, MLP 176 * 32 + 32 * 88 = 11584
  //   model: 2 layers + word embedding 64 * 32 + final norm 32 + output 64 * 32
  CHECK(llama.parameterCount() == 2 * 11584 + 2048 + 32 + 2048);
  //   MACs per token and layer: qkv 2048, scores 2 * seq * h, dense 1024, MLP 5632 + 2816
  CHECK(llama.forwardMacsPerSample(12).total() ==
        Approx(12 * (2 * (2048 + 2 * 12 * 32 + 1024 + 5632 + 2816) + 2048)));
  const auto modules = llama.profileModules(2, 12);
  CHECK(modules.front().params == static_cast<double>(llama.parameterCount()));
  CHECK(modules.front().macs == Approx(2 * llama.forwardMacsPerSample(12).total()));
  for (const auto& m : modules)
    if (m.name == "layers.0.mlp.activation") CHECK(m.type == "SwiGLU");

  // ScaleNorm has one gain per norm and no bias; a bias-free LayerNorm has only its weights.
  GptConfig s = smallConfig();
  s.norm = NormKind::ScaleNorm;
  //   per layer: norms 2, qkv 3072 + 96, dense 1024 + 32, MLP 4096 + 128 + 4096 + 32 = 12578
  //   model: 2 layers + embeddings (64 + 16 positions) * 32 + the final norm's 1
  CHECK(Gpt(s).parameterCount() == 2 * 12578 + 80 * 32 + 1);
  s.norm = NormKind::LayerNorm;
  s.biasInNorms = false;
  CHECK(Gpt(s).parameterCount() == 2 * (12578 - 2 + 64) + 80 * 32 + 32);
  CHECK(Gpt(s).profileModules(1, 12).front().params ==
        static_cast<double>(Gpt(s).parameterCount()));

  // The qk norm adds NeoX's norm([heads, head size]) per layer: LayerNorm weight and bias of h
  // each (use-bias-in-norms does not reach it), RMSNorm weights of h, ScaleNorm one gain; it
  // counts under attention.core and adds no MACs. A sliding window and tied gpt-j norms change
  // neither count: the full score matrix is computed, and NeoX keeps the unused second norm.
  const size_t plain = Gpt(smallConfig()).parameterCount();
  const double plainMacs = Gpt(smallConfig()).forwardMacsPerSample(12).total();
  for (auto [kind, extra] : {std::pair{NormKind::LayerNorm, 64}, std::pair{NormKind::RmsNorm, 32},
                             std::pair{NormKind::ScaleNorm, 1}}) {
    GptConfig q = smallConfig();
    q.norm = kind;
    const size_t base = Gpt(q).parameterCount();
    q.qkNorm = true;
    Gpt qk(q);
    INFO(ds::runtime::normName(kind));
    CHECK(qk.parameterCount() == base + 2 * extra);
    CHECK(qk.forwardMacsPerSample(12).total() == Approx(plainMacs));
    const auto mods = qk.profileModules(1, 12);
    CHECK(mods.front().params == static_cast<double>(qk.parameterCount()));
    for (const auto& m : mods)
      if (m.name == "layers.1.attention.core") CHECK(m.params == extra);
  }
  GptConfig w = smallConfig();
  w.slidingWindowWidth = 3;
  w.gptjResidual = w.gptjTied = true;
  CHECK(Gpt(w).parameterCount() == plain);
  CHECK(Gpt(w).forwardMacsPerSample(12).total() == Approx(plainMacs));
  // expansion-factor 2.5: an MLP of int(2.5 * 32) = 80, so 2 * (4h - 80) * h fewer weights and
  // 4h - 80 fewer biases per layer.
  w = smallConfig();
  w.expansionFactor = 2.5;
  CHECK(w.ffnSize() == 80);
  CHECK(Gpt(w).parameterCount() == plain - 2 * (2 * 48 * 32 + 48));

  // Refused by name: kv heads that do not divide the query heads, and NeoX-unbuildable widths.
  GptConfig bad = smallConfig();
  bad.numKvHeads = 3;
  CHECK_THROWS_WITH(Gpt(bad), Catch::Contains("num-kv-heads: 3 does not divide"));
  bad = smallConfig();
  bad.activation = Activation::Swiglu;  // 4h = 128: 85 outputs round to 86, 42 inputs stay
  CHECK_THROWS_WITH(Gpt(bad), Catch::Contains("dense_h_to_4h 86 outputs but dense_4h_to_h 42"));
}
