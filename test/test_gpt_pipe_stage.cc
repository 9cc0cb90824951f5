// GPT pipeline stages without an engine: the stage cut of NeoX's layer list, and a split model's
// forward/backward per micro-batch against the whole model's (bitwise: the same kernels run on
// the same values in the same order; only the tied embedding's two halves are summed elsewhere).
#include <catch2/catch.hpp>
#include <map>
#include <random>

#include "common/error.h"
#include "runtime/model/flat_parameters.h"
#include "runtime/model/gpt.h"
#include "runtime/model/gpt_stage_partition.h"

using namespace ds;
using namespace ds::runtime;

namespace {

GptConfig stageConfig() {
  GptConfig c;
  c.numLayers = 4;
  c.hiddenSize = 32;
  c.numAttentionHeads = 4;
  c.seqLength = 16;
  c.maxPositionEmbeddings = 16;
  c.vocabSize = 50;
  c.makeVocabSizeDivisibleBy = 16;
  c.initMethodStd = 0.2;
  return c;
}

Batch tokens(const GptConfig& c, size_t samples, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Batch b;
  b.size = samples;
  for (size_t i = 0; i < samples * static_cast<size_t>(c.seqLength); ++i) {
    b.inputIds.push_back(static_cast<int32_t>(rng() % c.vocabSize));
    b.targetIds.push_back(static_cast<int32_t>(rng() % c.vocabSize));
  }
  for (size_t s = 0; s < samples; ++s) b.sampleIds.push_back(seed * 100 + s);
  return b;
}

// A stage's parameters copied by name from the whole model's flat buffer.
std::vector<float> stageParameters(const Gpt& stage, const Gpt& whole,
                                   const std::vector<float>& wholeParams) {
  std::map<std::string, const ParamSpec*> byName;
  for (const ParamSpec& s : whole.parameters()) byName[s.name] = &s;
  std::vector<float> params(stage.parameterCount());
  for (const ParamSpec& s : stage.parameters()) {
    const ParamSpec& w = *byName.at(s.name);
    std::copy_n(wholeParams.begin() + static_cast<std::ptrdiff_t>(w.offset), s.numel,
                params.begin() + static_cast<std::ptrdiff_t>(s.offset));
  }
  return params;
}

}  // namespace

TEST_CASE("GPT stages: NeoX's layer list cut by each partition method", "[gpt][pipe]") {
  GptConfig c = stageConfig();
  const std::vector<PipeLayer> list = gptPipeLayers(c);
  REQUIRE(list.size() == 9);  // embedding, pre, 4 blocks, post, norm, tied head
  CHECK(list[1].typeName == "_pre_transformer_block");
  CHECK(list[8].typeName == "EmbeddingPipe");
  CHECK(list[8].paramCount == (64 + 16) * 32);  // a whole EmbeddingPipe: words and positions
  // "type:transformer|mlp" weighs _pre, the 4 blocks and _post (6 entries): 3 + 3 puts the cut
  // after block 2's entry, so the embedding and blocks 1-2 are stage 0.
  CHECK(gptStageBounds(c, 2, "type:transformer|mlp") == std::vector<int>{0, 3, 6});
  // Uniform over 9 entries in 2 parts: entries [0, 5) and [5, 9) (partition_uniform gives the
  // remainder to the first parts), so block 3 (entry 4) joins stage 0.
  CHECK(gptStageBounds(c, 2, "uniform") == std::vector<int>{0, 4, 6});
  // One layer per stage: 6 stages each take one transformer-typed entry.
  CHECK(gptStageBounds(c, 6, "type:transformer") == std::vector<int>{0, 1, 2, 3, 4, 5, 6});
  // 4 stages of 6 transformer-typed entries: each stage gets at least one block.
  const std::vector<int> four = gptStageBounds(c, 4, "type:transformer");
  REQUIRE(four.size() == 5);
  CHECK(four.front() == 0);
  CHECK(four.back() == 6);
  for (size_t s = 0; s + 1 < four.size(); ++s) CHECK(four[s] < four[s + 1]);
  // "parameters": the tied head counts a whole embedding, so the last stage takes fewer blocks.
  c.hiddenSize = 64;
  c.vocabSize = 2000;
  const std::vector<int> byParams = gptStageBounds(c, 2, "parameters");
  CHECK(byParams[1] >= 3);
  c.weightTying = false;
  CHECK(gptPipeLayers(c).back().typeName == "ParallelLinearPipe");
  // More stages than layers can fill: refused by name.
  CHECK_THROWS_WITH(gptStageBounds(stageConfig(), 7, "type:transformer"),
                    Catch::Contains("pipe-partition-method") && Catch::Contains("without layers"));
  CHECK_THROWS_WITH(gptStageBounds(stageConfig(), 2, "type:nosuchlayer"),
                    Catch::Contains("matches no layer"));
}

TEST_CASE("GPT stages: a bad placement is refused and a stage numbers its layers from 0",
          "[gpt][pipe]") {
  const GptConfig c = stageConfig();
  CHECK_THROWS_WITH(Gpt(c, GptPlacement{0, 1, nullptr, 3, 3}), Catch::Contains("GPT placement"));
  CHECK_THROWS_WITH(Gpt(c, GptPlacement{0, 1, nullptr, 2, 9}), Catch::Contains("GPT placement"));
  Gpt last(c, GptPlacement{0, 1, nullptr, 3, 6});
  CHECK(last.layerCount() == 3);
  CHECK(last.parameters().front().layer == 0);
  CHECK(last.parameters().front().name == "layers.2.input_layernorm.weight");
  // The tied copy closes the head's layer, out of the norm.
  CHECK(last.parameters().back().name == "embed.word_embeddings.weight");
  CHECK(last.parameters().back().layer == 2);
  CHECK_FALSE(last.parameters().back().countInGradNorm);
  CHECK(last.lastStage());
  CHECK_FALSE(last.firstStage());
  REQUIRE(last.pipelineStage() != nullptr);
  Gpt whole(c);
  CHECK(whole.pipelineStage() == nullptr);
  Gpt staged(c, GptPlacement{0, 1, nullptr, 0, 3});
  std::vector<float> p(staged.parameterCount());
  FlatParameters access(staged, p.data());
  CHECK_THROWS_WITH(staged.forwardBackward(tokens(c, 2, 1), access, 1.0f),
                    Catch::Contains("pipe schedule"));
}

TEST_CASE("GPT stages: two stages' forward and backward equal the whole model's per layer",
          "[gpt][pipe]") {
  for (const bool tied : {true, false})
    for (const bool checkpointing : {false, true}) {
      CAPTURE(tied, checkpointing);
      GptConfig c = stageConfig();
      c.weightTying = tied;
      c.posEmb = PositionEmbedding::Rotary;
      c.numKvHeads = 2;  // GQA
      c.hiddenDropout = c.attentionDropout = 0.1;
      c.checkpointActivations = checkpointing;
      Gpt whole(c);
      std::vector<float> params(whole.parameterCount());
      whole.initParameters(params.data(), 9);
      const std::vector<Batch> micro = {tokens(c, 2, 1), tokens(c, 2, 2)};
      FlatParameters wholeAccess(whole, params.data());
      std::vector<float> wholeLoss;
      for (const Batch& b : micro) wholeLoss.push_back(whole.forwardBackward(b, wholeAccess, 0.5f));

      Gpt s0(c, GptPlacement{0, 1, nullptr, 0, 3}), s1(c, GptPlacement{0, 1, nullptr, 3, 6});
      const std::vector<float> p0 = stageParameters(s0, whole, params),
                               p1 = stageParameters(s1, whole, params);
      FlatParameters a0(s0, p0.data()), a1(s1, p1.data());
      s0.setPipeBuffers(2);
      s1.setPipeBuffers(2);
      // Both forwards before either backward, as 1F1B runs a stage with two micro-batches in
      // flight: each buffer must keep its own activations.
      const size_t n = s0.boundaryElements(micro[0]);
      std::vector<std::vector<float>> act(2, std::vector<float>(n)), grad(2, std::vector<float>(n));
      std::vector<float> stageLoss;
      for (int b = 0; b < 2; ++b) {
        s0.stageForward(b, micro[b], nullptr, act[b].data(), a0, 0.5f, true);
        stageLoss.push_back(s1.stageForward(b, micro[b], act[b].data(), nullptr, a1, 0.5f, true));
      }
      for (int b = 0; b < 2; ++b) {
        s1.stageBackward(b, nullptr, grad[b].data(), a1);
        s0.stageBackward(b, grad[b].data(), nullptr, a0);
      }
      CHECK(stageLoss == wholeLoss);
      std::map<std::string, std::vector<float>> stageGrads;
      for (auto [stage, access] : {std::pair{&s0, &a0}, std::pair{&s1, &a1}})
        for (const ParamSpec& s : stage->parameters()) {
          auto& g = stageGrads[s.name];
          g.resize(s.numel, 0.0f);
          for (size_t i = 0; i < s.numel; ++i) g[i] += access->gradients()[s.offset + i];
        }
      for (const ParamSpec& s : whole.parameters()) {
        CAPTURE(s.name);
        const std::vector<float> expected(wholeAccess.gradients().begin() + s.offset,
                                          wholeAccess.gradients().begin() + s.offset + s.numel);
        const std::vector<float>& got = stageGrads.at(s.name);
        if (tied && s.name == "embed.word_embeddings.weight") {
          // Summed per micro-batch on one rank, per stage then across the two here.
          for (size_t i = 0; i < s.numel; ++i)
            REQUIRE(got[i] == Approx(expected[i]).epsilon(1e-5).margin(1e-7));
        } else {
          CHECK(got == expected);
        }
      }
    }
}
