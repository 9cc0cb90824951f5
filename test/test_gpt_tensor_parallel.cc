// The GPT model sliced over 2 and 4 model ranks (threads over an in-process shared-memory group)
// against the one-rank model: the slices' initial values are the one-rank tensors' elements bit
// for bit, and one forward/backward gives the same loss and, slice by slice, the same gradients.
// Those agree within 1e-5 (relative to each tensor's largest gradient), not bitwise: the sliced
// model sums partial matrix products, the softmax's row sums and the head's input gradient across
// ranks, in another order than the one-rank matrix products do.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/slice_map.h"
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

constexpr uint64_t kSeed = 1234;

struct Variant {
  const char* name;
  GptConfig config;
};

std::vector<Variant> variants() {
  std::vector<Variant> v;
  {
    GptConfig c = test::tinyGpt();  // rotary, GQA, SwiGLU, RMSNorm, tied embeddings
    c.numAttentionHeads = 8;
    c.numKvHeads = 4;
    c.posEmb = PositionEmbedding::Rotary;
    c.activation = Activation::Swiglu;
    c.norm = NormKind::RmsNorm;
    c.intermediateSize = 96;
    v.push_back({"rotary GQA swiglu rmsnorm tied", c});
  }
  {
    GptConfig c = test::tinyGpt();  // learned positions, LayerNorm, GeLU, biases, untied
    c.weightTying = false;
    v.push_back({"learned layernorm gelu biases untied", c});
  }
  {
    GptConfig c = test::tinyGpt();
    c.posEmb = PositionEmbedding::Rotary;
    c.gptjResidual = true;
    c.activation = Activation::Geglu;
    c.slidingWindowWidth = 5;
    c.biasInAttnLinear = false;
    v.push_back({"parallel residual geglu sliding window", c});
  }
  {
    GptConfig c = test::tinyGpt();
    c.gptjResidual = true;
    c.gptjTied = true;
    c.posEmb = PositionEmbedding::Sinusoidal;
    c.biasInMlp = false;
    v.push_back({"gpt-j tied norms sinusoidal", c});
  }
  {
    GptConfig c = test::tinyGpt();  // dropout keyed by the global head, recomputed in backward
    c.attentionDropout = 0.2;
    c.hiddenDropout = 0.1;
    c.checkpointActivations = true;
    c.numKvHeads = 4;
    c.numAttentionHeads = 8;
    v.push_back({"dropout with activation checkpointing", c});
    c.partitionActivations = true;  // the kept inputs split over the model ranks
    v.push_back({"dropout with partitioned activation checkpoints", c});
  }
  return v;
}

struct Pass {
  std::vector<float> params, grads;
  float loss = 0.0f;
};

// One forward/backward of the model sliced over t ranks (threads), from kSeed's parameters: each
// rank's loss, gradients and peak activation bytes. `evaluate`: then an evaluation of the same
// batch, which must give a finite loss.
struct SlicedPass {
  float loss = 0.0f;
  std::vector<float> grads;
  size_t peak = 0;
};
std::vector<SlicedPass> slicedPasses(const GptConfig& c, const Batch& batch, int t,
                                     bool evaluate = false) {
  auto group = shmGroup(t);
  std::vector<SlicedPass> out(t);
  onThreads(t, [&](int r) {
    Gpt m(c, GptPlacement{r, t, &group[r]});
    std::vector<float> params(m.parameterCount());
    m.initParameters(params.data(), kSeed);
    FlatParameters access(m, params.data());
    out[r].loss = m.forwardBackward(batch, access, 1.0f);
    out[r].grads = access.gradients();
    out[r].peak = m.peakActivationBytes();
    if (evaluate) test::rankCheck(std::isfinite(m.evaluate(batch, access)), "evaluation loss");
  });
  return out;
}

// The same pass keeping each rank's model and parameters as well.
struct SlicedRanks {
  std::vector<std::unique_ptr<Gpt>> models;
  std::vector<Pass> passes;
};
SlicedRanks slicedRanks(const GptConfig& c, const Batch& batch, int t) {
  auto group = shmGroup(t);
  SlicedRanks out;
  out.models.resize(t);
  out.passes.resize(t);
  onThreads(t, [&](int r) {
    out.models[r] = std::make_unique<Gpt>(c, GptPlacement{r, t, &group[r]});
    Gpt& m = *out.models[r];
    Pass& pass = out.passes[r];
    pass.params.resize(m.parameterCount());
    m.initParameters(pass.params.data(), kSeed);
    FlatParameters access(m, pass.params.data());
    pass.loss = m.forwardBackward(batch, access, 1.0f);
    pass.grads = access.gradients();
  });
  return out;
}

}  // namespace

TEST_CASE("sliced GPT: initial slices, loss and gradients equal the one-rank model's",
          "[gpt_tensor_parallel]") {
  // Each variant with tensor slicing alone, then with Megatron's sequence parallelism (48 rows
  // over 4 ranks: shards that cut samples, whose dropout masks must stay the sample's).
  for (const bool sequenceParallel : {false, true})
  for (Variant variant : variants()) {
    variant.config.sequenceParallel = sequenceParallel;
    const GptConfig& c = variant.config;
    Gpt reference(c);
    Pass whole;
    whole.params.resize(reference.parameterCount());
    reference.initParameters(whole.params.data(), kSeed);
    const Batch batch = test::tokenBatch(40, 3, 16, c.vocabSize);
    {
      FlatParameters access(reference, whole.params.data());
      whole.loss = reference.forwardBackward(batch, access, 1.0f);
      whole.grads = access.gradients();
    }
    const auto& refSpecs = reference.parameters();
    for (int t : {2, 4}) {
      INFO(variant.name << ", model-parallel size " << t
                        << (sequenceParallel ? ", sequence parallel" : ""));
      const SlicedRanks ranks = slicedRanks(c, batch, t);
      const std::vector<std::unique_ptr<Gpt>>& models = ranks.models;
      const std::vector<Pass>& got = ranks.passes;
      std::vector<float> full(reference.parameterCount());
      std::vector<int> writes(full.size(), 0);
      for (int r = 0; r < t; ++r) {
        INFO("model rank " << r);
        const Gpt& m = *models[r];
        REQUIRE(m.parameters().size() == refSpecs.size());
        CHECK(got[r].loss == Approx(whole.loss).epsilon(1e-5));
        test::scatterSlice(m, got[r].params, refSpecs, full, writes);
        std::vector<float> fullGrad = whole.grads;  // elements the rank lacks compare to themselves
        std::vector<int> unused(full.size(), 0);
        test::scatterSlice(m, got[r].grads, refSpecs, fullGrad, unused);
        for (size_t i = 0; i < refSpecs.size(); ++i) {
          const ParamSpec& spec = m.parameters()[i];
          INFO(spec.name);
          CHECK(spec.name == refSpecs[i].name);
          const bool sliced = !spec.slice.whole();
          if (sliced) CHECK_NOTHROW(checkSliceMap(spec.slice, spec.numel, spec.name));
          CHECK(spec.fullSlice().fullNumel == refSpecs[i].numel);
          CHECK(spec.numel == (sliced ? refSpecs[i].numel / t : refSpecs[i].numel));
          CHECK(spec.countInGradNorm == (sliced || r == 0));
          CHECK(test::tensorRelativeDifference(fullGrad, whole.grads, refSpecs[i]) < 1e-5);
        }
        for (size_t i = 0; i < refSpecs.size(); ++i)  // the slice's values, bit for bit
          for (size_t e = 0; e < m.parameters()[i].numel; ++e)
            if (got[r].params[m.parameters()[i].offset + e] !=
                whole.params[refSpecs[i].offset + test::fullIndex(m.parameters()[i], e)]) {
              FAIL_CHECK(refSpecs[i].name << " element " << e << " differs from its full element");
              break;
            }
      }
      CHECK(full == whole.params);  // together the slices are the whole model
      CHECK(std::count(writes.begin(), writes.end(), 0) == 0);
    }
  }
}

TEST_CASE(
    "sliced GPT: MoE layers split their experts over the model ranks, the same loss and "
    "gradients",
    "[gpt_tensor_parallel][moe]") {
  // 4 experts over 2 and 4 model ranks (each rank its experts whole, by their global names; the
  // router on every rank, counted in the norm once), with and without sequence parallelism, a
  // dense block between the MoE ones: NeoX's dropless Sinkhorn top-1 and top-k top-2 with jitter,
  // and DeepSpeed's top-2 gating with dropping, random token selection, l_aux and the residual
  // MLP (sliced as the dense one, its coefficient on every rank).
  enum Flavour { kSinkhorn, kTopK, kDeepSpeed };
  for (const bool sequenceParallel : {false, true})
    for (const Flavour flavour : {kSinkhorn, kTopK, kDeepSpeed}) {
      GptConfig c = test::tinyGpt();
      c.numLayers = 3;
      c.moe.numExperts = 4;
      c.moe.expertInterval = 2;
      c.moe.router = flavour == kTopK ? MoeRouter::TopK : MoeRouter::Sinkhorn;
      c.moe.topK = flavour == kSinkhorn ? 1 : 2;
      c.moe.jitterEps = flavour == kTopK ? 0.01 : 0.0;
      if (flavour == kDeepSpeed) {
        c.moe.kind = MoeKind::DeepSpeed;
        c.moe.tokenDropping = true;
        c.moe.trainCapacityFactor = 0.75;
        c.moe.useResidual = true;
      }
      c.sequenceParallel = sequenceParallel;
      Gpt reference(c);
      std::vector<float> params(reference.parameterCount());
      reference.initParameters(params.data(), kSeed);
      const Batch batch = test::tokenBatch(40, 3, 16, c.vocabSize);
      FlatParameters access(reference, params.data());
      const float loss = reference.forwardBackward(batch, access, 1.0f);
      const std::vector<float> grads = access.gradients();
      const auto& refSpecs = reference.parameters();
      for (int t : {2, 4}) {
        INFO("flavour " << flavour << ", model-parallel size " << t
                        << (sequenceParallel ? ", sequence parallel" : ""));
        const SlicedRanks ranks = slicedRanks(c, batch, t);
        const std::vector<std::unique_ptr<Gpt>>& models = ranks.models;
        const std::vector<Pass>& got = ranks.passes;
        std::vector<float> full(params.size()), fullGrad(params.size());
        std::vector<int> writes(full.size(), 0), gradWrites(full.size(), 0);
        size_t experts = 0;
        for (int r = 0; r < t; ++r) {
          INFO("model rank " << r);
          CHECK(got[r].loss == Approx(loss).epsilon(1e-5));
          test::scatterSlice(*models[r], got[r].params, refSpecs, full, writes);
          test::scatterSlice(*models[r], got[r].grads, refSpecs, fullGrad, gradWrites);
          for (const ParamSpec& spec : models[r]->parameters()) {
            if (spec.name.find(".mlp.experts.") != std::string::npos) {
              ++experts;
              const size_t e = std::stoul(spec.name.substr(spec.name.find("experts.") + 8));
              CHECK(e / (4 / t) == static_cast<size_t>(r));  // experts [r E / t, (r + 1) E / t)
              CHECK(spec.countInGradNorm);
            }
            if (spec.name.find("router") != std::string::npos ||
                spec.name.find("coefficient") != std::string::npos)
              CHECK(spec.countInGradNorm == (r == 0));
          }
        }
        // 2 MoE layers x 4 experts x fc1, fc2 (DeepSpeed's: and their biases), once
        CHECK(experts == 2 * 4 * (flavour == kDeepSpeed ? 4 : 2));
        CHECK(full == params);  // together the ranks hold the whole model, each element once
        CHECK(std::count(writes.begin(), writes.end(), 0) == 0);
        for (const ParamSpec& spec : refSpecs) {
          INFO(spec.name);
          CHECK(test::tensorRelativeDifference(fullGrad, grads, spec) < 1e-5);
        }
      }
    }
}

TEST_CASE(
    "sliced GPT: ParamSpec::slice is Megatron's layout, and the head stage's tied copy is "
    "sliced as the word embeddings",
    "[gpt_tensor_parallel]") {
  GptConfig c = test::tinyGpt();  // h 32, vocab 256
  c.numAttentionHeads = 8;
  c.numKvHeads = 4;
  c.posEmb = PositionEmbedding::Rotary;
  c.activation = Activation::Swiglu;
  c.intermediateSize = 96;
  const uint64_t h = 32, V = 256, d = 4, heads = 8, kv = 4;
  const auto ff = static_cast<uint64_t>(c.ffnSize());  // per half of the gated h_to_4h
  REQUIRE(c.ffnInputSize() == 2 * c.ffnSize());
  auto group = shmGroup(2);
  std::vector<std::unique_ptr<Gpt>> whole(2), head(2);
  onThreads(2, [&](int r) {
    whole[r] = std::make_unique<Gpt>(c, GptPlacement{r, 2, &group[r]});
    head[r] = std::make_unique<Gpt>(c, GptPlacement{r, 2, &group[r], c.numLayers + 1, -1});
  });
  for (uint64_t r = 0; r < 2; ++r) {
    INFO("model rank " << r);
    auto slice = [&](const Gpt& m, const std::string& name) {
      for (const ParamSpec& s : m.parameters())
        if (s.name == name) return s.slice;
      FAIL(name << " missing");
      return SliceMap{};
    };
    const Gpt& m = *whole[r];
    using Runs = std::vector<StridedRun>;
    CHECK(slice(m, "embed.word_embeddings.weight") ==
          SliceMap{V * h, Runs{{r * V / 2 * h, V / 2 * h}}});
    CHECK(slice(m, "layers.1.attention.query_key_value.weight") ==
          SliceMap{(heads + 2 * kv) * d * h,
                   Runs{{r * heads / 2 * d * h, heads / 2 * d * h},
                        {(heads + r * kv / 2) * d * h, kv / 2 * d * h},
                        {(heads + kv + r * kv / 2) * d * h, kv / 2 * d * h}}});
    CHECK(slice(m, "layers.1.attention.dense.weight") ==
          SliceMap{h * h, Runs{{r * h / 2, h / 2, h, h}}});
    CHECK(slice(m, "layers.0.mlp.dense_h_to_4h.weight") ==
          SliceMap{2 * ff * h,
                   Runs{{r * ff / 2 * h, ff / 2 * h}, {(ff + r * ff / 2) * h, ff / 2 * h}}});
    CHECK(slice(m, "layers.0.mlp.dense_4h_to_h.weight") ==
          SliceMap{h * ff, Runs{{r * ff / 2, ff / 2, h, ff}}});
    CHECK(slice(m, "final_layer_norm.weight").whole());
    // The last stage's own copy of the tied embeddings: the same rows, out of the gradient norm.
    const ParamSpec& tied = head[r]->parameters().back();
    CHECK(tied.name == "embed.word_embeddings.weight");
    CHECK(tied.slice == slice(m, "embed.word_embeddings.weight"));
    CHECK(tied.shape == std::vector<int64_t>{static_cast<int64_t>(V / 2), static_cast<int64_t>(h)});
    CHECK_FALSE(tied.countInGradNorm);
    for (const Gpt* g : {whole[r].get(), head[r].get()})
      for (const ParamSpec& s : g->parameters())
        if (!s.slice.whole()) CHECK_NOTHROW(checkSliceMap(s.slice, s.numel, s.name));
  }
}

TEST_CASE("sliced GPT: partition-activations keeps 1/t of each checkpointed block input, the "
          "same gradients bit for bit",
          "[gpt_tensor_parallel]") {
  GptConfig c = test::tinyGpt();
  c.checkpointActivations = true;
  c.numLayers = 4;
  const Batch batch = test::tokenBatch(40, 4, 16, c.vocabSize);
  const int t = 2;
  auto run = [&](bool partition) {
    c.partitionActivations = partition;
    return slicedPasses(c, batch, t);
  };
  const std::vector<SlicedPass> kept = run(false), split = run(true);
  const size_t inputBytes = 4 * 16 * c.hiddenSize * sizeof(float);  // one block input
  for (int r = 0; r < t; ++r) {
    CHECK(split[r].grads == kept[r].grads);
    // Four blocks keep their inputs: each rank saves half of each of them.
    CHECK(kept[r].peak - split[r].peak >= 4 * inputBytes / 2);
  }
}

TEST_CASE("sequence-parallel GPT: each model rank keeps its share of the rows, the same loss",
          "[gpt_tensor_parallel]") {
  GptConfig c = test::tinyGpt();
  c.numLayers = 4;
  c.hiddenDropout = 0.1;
  const Batch batch = test::tokenBatch(40, 4, 16, c.vocabSize);
  const int t = 4;
  auto run = [&](bool sequenceParallel) {
    c.sequenceParallel = sequenceParallel;
    return slicedPasses(c, batch, t, true);
  };
  const std::vector<SlicedPass> sliced = run(false), sharded = run(true);
  // A block keeps 4 row tensors of [N, h] with the default config (input, two norms, mid): each
  // rank keeps a quarter of them.
  const size_t rowTensor = 4 * 16 * c.hiddenSize * sizeof(float);
  for (int r = 0; r < t; ++r) {
    INFO("model rank " << r);
    CHECK(sharded[r].loss == Approx(sliced[r].loss).epsilon(1e-6));
    CHECK(sliced[r].peak - sharded[r].peak >= c.numLayers * 4 * rowTensor * 3 / 4);
  }
}

TEST_CASE("sliced GPT: next-token logits gather the vocabulary on every model rank",
          "[gpt_tensor_parallel]") {
  GptConfig c = test::tinyGpt();
  c.posEmb = PositionEmbedding::Rotary;
  Gpt reference(c);
  std::vector<float> params(reference.parameterCount());
  reference.initParameters(params.data(), kSeed);
  const std::vector<int32_t> tokens = {5, 17, 250, 3, 99};
  FlatParameters access(reference, params.data());
  const std::vector<float> expected = reference.nextTokenLogits(tokens, access);
  const int t = 2;
  auto group = shmGroup(t);
  std::vector<std::vector<float>> got(t);
  onThreads(t, [&](int r) {
    Gpt m(c, GptPlacement{r, t, &group[r]});
    std::vector<float> local(m.parameterCount());
    m.initParameters(local.data(), kSeed);
    FlatParameters a(m, local.data());
    m.setProfiling(true);  // the profiler's table (full-model figures) on a slice
    got[r] = m.nextTokenLogits(tokens, a);
    test::rankCheck(!m.profileModules(1, tokens.size()).empty(), "profiler table");
  });
  for (int r = 0; r < t; ++r) {
    REQUIRE(got[r].size() == expected.size());
    for (size_t i = 0; i < expected.size(); ++i)
      REQUIRE(got[r][i] == Approx(expected[i]).margin(1e-5));
  }
}

TEST_CASE("sliced GPT: what slicing cannot do is refused by name", "[gpt_tensor_parallel]") {
  auto group = shmGroup(4);
  auto refused = [&](GptConfig c, int t, const std::string& key) {
    try {
      Gpt m(c, GptPlacement{0, t, &group[0]});
    } catch (const Error& e) {
      INFO(e.what());
      CHECK(std::string(e.what()).find(key) != std::string::npos);
      return;
    }
    FAIL("not refused: " << key);
  };
  GptConfig c = test::tinyGpt();
  c.numKvHeads = 2;
  refused(c, 4, "num-kv-heads");
  c = test::tinyGpt();
  c.numAttentionHeads = 2;
  refused(c, 4, "num-attention-heads");
  c = test::tinyGpt();
  c.qkNorm = true;
  refused(c, 2, "use-qk-layernorm");
  c = test::tinyGpt();
  c.intermediateSize = 66;
  refused(c, 4, "intermediate-size");
  refused(test::tinyGpt(), 2, "model-parallel group");  // a group of 4 for a size of 2
  c = test::tinyGpt();
  c.sequenceParallel = true;
  c.seqLength = c.maxPositionEmbeddings = 18;
  refused(c, 4, "seq-length");
  // The one-rank padding where the slices divide it (257 tokens pad to 384 at t = 1 with 128:
  // 96 rows each at t = 4, the same model); else NeoX's (multiple 6 x 4: 264 rows).
  GptConfig padded = test::tinyGpt();
  padded.vocabSize = 257;
  padded.makeVocabSizeDivisibleBy = 128;
  Gpt four(padded, GptPlacement{1, 4, &group[1]});
  CHECK(four.config().paddedVocabSize() == 384);
  CHECK(four.parameters()[0].shape == std::vector<int64_t>{96, 32});
  padded.makeVocabSizeDivisibleBy = 6;  // 258 at t = 1: not a multiple of 4
  Gpt padded24(padded, GptPlacement{1, 4, &group[1]});
  CHECK(padded24.config().paddedVocabSize() == 264);
  CHECK(padded24.parameters()[0].shape == std::vector<int64_t>{66, 32});
}
