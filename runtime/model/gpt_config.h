// The GPT model's architecture, in GPT-NeoX's terms (../shared/seeds/neox-config-parameters.md):
// the values of its model keys after defaults, as the NeoX YAML reader fills them. Checked by
// validate(), which names the NeoX key of anything wrong.
#pragma once

#include <cstdint>
#include <string>

namespace ds::runtime {

enum class PositionEmbedding { Learned, Sinusoidal, Rotary, None };
enum class NormKind { LayerNorm, RmsNorm };
enum class Activation { Gelu, Geglu };
// NeoX's init methods: normal (std), scaled_normal (std / sqrt(2 * layers)), small_init
// (sqrt(2 / (5 * hidden))), wang_init (2 / layers / sqrt(hidden)).
enum class InitMethod { Normal, ScaledNormal, SmallInit, WangInit };

struct GptConfig {
  int numLayers = 2;
  int hiddenSize = 64;
  int numAttentionHeads = 4;
  int seqLength = 64;
  int maxPositionEmbeddings = 64;
  int vocabSize = 257;  // the tokenizer's; padded below
  int makeVocabSizeDivisibleBy = 128;
  PositionEmbedding posEmb = PositionEmbedding::Learned;
  double rotaryPct = 1.0;
  double rotaryEmbBase = 10000.0;
  NormKind norm = NormKind::LayerNorm;
  double layernormEpsilon = 1e-5;
  double rmsNormEpsilon = 1e-8;
  Activation activation = Activation::Gelu;
  bool weightTying = true;  // NeoX's no-weight-tying: false
  bool gptjResidual = false;
  double attentionDropout = 0.0;
  double hiddenDropout = 0.0;
  InitMethod initMethod = InitMethod::Normal;
  InitMethod outputLayerInitMethod = InitMethod::ScaledNormal;
  double initMethodStd = 0.02;
  bool checkpointActivations = false;

  // The embedding and output rows: vocabSize rounded up to makeVocabSizeDivisibleBy.
  int paddedVocabSize() const;
  int headDim() const { return hiddenSize / numAttentionHeads; }
  int rotaryDim() const;  // dims of each head that rotary embedding turns (even)
  // The MLP's inner width (4 * hidden) and its first projection's outputs (twice that for geglu).
  int ffnSize() const { return 4 * hiddenSize; }
  int ffnInputSize() const { return activation == Activation::Geglu ? 2 * ffnSize() : ffnSize(); }

  // Throws ds::Error naming the NeoX key (e.g. "num-attention-heads: 5 does not divide
  // hidden-size 64").
  void validate() const;
  std::string describe() const;  // one line: layers, hidden, heads, options
};

const char* positionEmbeddingName(PositionEmbedding p);
const char* normName(NormKind n);
const char* activationName(Activation a);
const char* initMethodName(InitMethod m);

}  // namespace ds::runtime
