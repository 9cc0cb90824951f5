#include "runtime/model/gpt_config.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common/error.h"

namespace ds::runtime {
namespace {

void require(bool ok, const std::string& message) {
  if (!ok) throw Error(message);
}

}  // namespace

int GptConfig::paddedVocabSize() const {
  const int64_t d = makeVocabSizeDivisibleBy;
  return static_cast<int>((vocabSize + d - 1) / d * d);
}

int GptConfig::rotaryDim() const {
  if (posEmb != PositionEmbedding::Rotary) return 0;
  const int dim = static_cast<int>(headDim() * rotaryPct);
  return dim - dim % 2;
}

void GptConfig::validate() const {
  constexpr int kMaxDimension = 1 << 20;  // keeps every product of two sizes in 64 bits
  auto positive = [&](const char* key, int64_t v) {
    require(v > 0 && v <= kMaxDimension, std::string(key) + ": expected 1.." +
                                             std::to_string(kMaxDimension) + ", got " +
                                             std::to_string(v));
  };
  positive("num-layers", numLayers);
  positive("hidden-size", hiddenSize);
  positive("num-attention-heads", numAttentionHeads);
  positive("seq-length", seqLength);
  positive("max-position-embeddings", maxPositionEmbeddings);
  positive("make-vocab-size-divisible-by", makeVocabSizeDivisibleBy);
  positive("vocabulary size (from the tokenizer)", vocabSize);
  require(hiddenSize % numAttentionHeads == 0,
          "num-attention-heads: " + std::to_string(numAttentionHeads) + " does not divide hidden-size " +
              std::to_string(hiddenSize));
  require(seqLength <= maxPositionEmbeddings || posEmb == PositionEmbedding::None ||
              posEmb == PositionEmbedding::Rotary,
          "seq-length: " + std::to_string(seqLength) + " exceeds max-position-embeddings " +
              std::to_string(maxPositionEmbeddings) + "; raise max-position-embeddings");
  require(rotaryPct > 0.0 && rotaryPct <= 1.0,
          "rotary-pct: expected a fraction in (0, 1], got " + std::to_string(rotaryPct));
  require(posEmb != PositionEmbedding::Rotary || rotaryDim() >= 2,
          "rotary-pct: " + std::to_string(rotaryPct) + " of head size " + std::to_string(headDim()) +
              " turns no dimension pair; raise rotary-pct");
  require(rotaryEmbBase > 0.0, "rotary-emb-base: expected > 0");
  require(layernormEpsilon > 0.0 && std::isfinite(layernormEpsilon),
          "layernorm-epsilon: expected a positive number");
  require(rmsNormEpsilon >= 0.0 && std::isfinite(rmsNormEpsilon),
          "rms-norm-epsilon: expected a non-negative number");
  for (auto [key, p] : {std::pair{"attention-dropout", attentionDropout},
                        std::pair{"hidden-dropout", hiddenDropout}})
    require(p >= 0.0 && p < 1.0,
            std::string(key) + ": expected a probability in [0, 1), got " + std::to_string(p));
  require(initMethodStd > 0.0 && std::isfinite(initMethodStd),
          "init-method-std: expected a positive number");
  // Sizes each within bounds can still multiply into a model no machine holds: refuse it here,
  // with the count, rather than fail an allocation later.
  const double h = hiddenSize, layers = numLayers, vocab = paddedVocabSize();
  const double positions = std::max(seqLength, maxPositionEmbeddings);
  const double params = layers * (12.0 * h * h + 13.0 * h) + 2.0 * vocab * h + positions * h;
  char text[160];
  std::snprintf(text, sizeof text,
                "num-layers/hidden-size: a model of about %.3g parameters; this trainer holds at "
                "most 1e12",
                params);
  require(params <= 1e12, text);
  std::snprintf(text, sizeof text,
                "max-position-embeddings x hidden-size: position tables of %.3g values; at most "
                "2^31",
                positions * h);
  require(positions * h <= 2147483648.0, text);
}

std::string GptConfig::describe() const {
  std::string s = std::to_string(numLayers) + " layers, hidden " + std::to_string(hiddenSize) +
                  ", " + std::to_string(numAttentionHeads) + " heads, seq " +
                  std::to_string(seqLength) + ", vocab " + std::to_string(paddedVocabSize()) +
                  ", " + positionEmbeddingName(posEmb) + " positions, " + normName(norm) + ", " +
                  activationName(activation);
  if (!weightTying) s += ", untied output";
  if (gptjResidual) s += ", gpt-j residual";
  if (checkpointActivations) s += ", activation checkpointing";
  return s;
}

const char* positionEmbeddingName(PositionEmbedding p) {
  switch (p) {
    case PositionEmbedding::Learned:
      return "learned";
    case PositionEmbedding::Sinusoidal:
      return "sinusoidal";
    case PositionEmbedding::Rotary:
      return "rotary";
    case PositionEmbedding::None:
      break;
  }
  return "none";
}

const char* normName(NormKind n) { return n == NormKind::RmsNorm ? "rmsnorm" : "layernorm"; }

const char* activationName(Activation a) { return a == Activation::Geglu ? "geglu" : "gelu"; }

const char* initMethodName(InitMethod m) {
  switch (m) {
    case InitMethod::Normal:
      return "normal";
    case InitMethod::ScaledNormal:
      return "scaled_normal";
    case InitMethod::SmallInit:
      return "small_init";
    case InitMethod::WangInit:
      return "wang_init";
  }
  return "normal";
}

}  // namespace ds::runtime
