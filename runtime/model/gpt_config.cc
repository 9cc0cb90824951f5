#include "runtime/model/gpt_config.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>

#include "common/error.h"

namespace ds::runtime {
namespace {

void require(bool ok, const std::string& message) {
  if (!ok) throw Error(message);
}

int64_t roundUp(int64_t n, int64_t multiple) { return (n + multiple - 1) / multiple * multiple; }

// dense_h_to_4h's outputs and dense_4h_to_h's inputs, as NeoX's ParallelMLP sizes them: the base
// width is intermediate-size (else 4h); gated activations take int(2/3 of it) outputs, to keep
// the parameter count of an ungated MLP, and half that as inputs; then the outputs round up to a
// multiple of 2 * mlp-multiple-of and the inputs to a multiple of mlp-multiple-of. The two
// roundings can disagree (an odd 2/3 width); NeoX then fails, and validate() refuses the shape.
// GeGLU with neither key set keeps the sizing of NeoX's first GeGLU (8h outputs, 4h inputs),
// which this trainer's GeGLU models have always had.
std::pair<int64_t, int64_t> mlpWidths(const GptConfig& c) {
  const int64_t h = c.hiddenSize;
  if (c.activation == Activation::Geglu && c.intermediateSize == 0 && c.mlpMultipleOf == 0 &&
      c.expansionFactor == 0.0)
    return {8 * h, 4 * h};
  const int64_t multiple = c.mlpMultipleOf > 0 ? c.mlpMultipleOf : 1;
  // expansion-factor: Python's int(expansion_factor * hidden_size), truncated
  int64_t out = c.intermediateSize > 0  ? c.intermediateSize
                : c.expansionFactor > 0 ? static_cast<int64_t>(c.expansionFactor * h)
                                        : 4 * h;
  int64_t in = out;
  if (c.gated()) {
    out = 2 * out / 3;  // Python's int(x * 2 / 3): exact for these sizes
    in = out / 2;
  }
  return {roundUp(out, 2 * multiple), roundUp(in, multiple)};
}


constexpr int kMaxDimension = 1 << 20;  // keeps every product of two sizes in 64 bits

void checkDimensions(const GptConfig& c) {
  auto positive = [&](const char* key, int64_t v) {
    require(v > 0 && v <= kMaxDimension, std::string(key) + ": expected 1.." +
                                             std::to_string(kMaxDimension) + ", got " +
                                             std::to_string(v));
  };
  positive("num-layers", c.numLayers);
  positive("hidden-size", c.hiddenSize);
  positive("num-attention-heads", c.numAttentionHeads);
  positive("seq-length", c.seqLength);
  positive("max-position-embeddings", c.maxPositionEmbeddings);
  positive("make-vocab-size-divisible-by", c.makeVocabSizeDivisibleBy);
  positive("vocabulary size (from the tokenizer)", c.vocabSize);
  require(c.hiddenSize % c.numAttentionHeads == 0,
          "num-attention-heads: " + std::to_string(c.numAttentionHeads) +
              " does not divide hidden-size " + std::to_string(c.hiddenSize));
}

void checkPositionsAndNorms(const GptConfig& c) {
  require(c.seqLength <= c.maxPositionEmbeddings || c.posEmb == PositionEmbedding::None ||
              c.posEmb == PositionEmbedding::Rotary,
          "seq-length: " + std::to_string(c.seqLength) + " exceeds max-position-embeddings " +
              std::to_string(c.maxPositionEmbeddings) + "; raise max-position-embeddings");
  require(c.rotaryPct > 0.0 && c.rotaryPct <= 1.0,
          "rotary-pct: expected a fraction in (0, 1], got " + std::to_string(c.rotaryPct));
  require(c.posEmb != PositionEmbedding::Rotary || c.rotaryDim() >= 2,
          "rotary-pct: " + std::to_string(c.rotaryPct) + " of head size " +
              std::to_string(c.headDim()) + " turns no dimension pair; raise rotary-pct");
  require(c.rotaryEmbBase > 0.0, "rotary-emb-base: expected > 0");
  require(c.layernormEpsilon > 0.0 && std::isfinite(c.layernormEpsilon),
          "layernorm-epsilon: expected a positive number");
  require(c.rmsNormEpsilon >= 0.0 && std::isfinite(c.rmsNormEpsilon),
          "rms-norm-epsilon: expected a non-negative number");
  require(c.scalenormEpsilon > 0.0 && std::isfinite(c.scalenormEpsilon),
          "scalenorm-epsilon: expected a positive number");
}

void checkKvHeads(const GptConfig& c) {
  require(c.numKvHeads >= 0 && c.numKvHeads <= c.numAttentionHeads &&
              (c.numKvHeads == 0 || c.numAttentionHeads % c.numKvHeads == 0),
          "num-kv-heads: " + std::to_string(c.numKvHeads) +
              " does not divide num-attention-heads " + std::to_string(c.numAttentionHeads) +
              "; each key/value head serves a group of query "
              "heads");
}

void checkMlpWidthKeys(const GptConfig& c) {
  require(c.intermediateSize >= 0 && c.intermediateSize <= kMaxDimension,
          "intermediate-size: expected 1.." + std::to_string(kMaxDimension) + ", got " +
              std::to_string(c.intermediateSize));
  require(c.mlpMultipleOf >= 0 && c.mlpMultipleOf <= kMaxDimension,
          "mlp-multiple-of: expected 1.." + std::to_string(kMaxDimension) + ", got " +
              std::to_string(c.mlpMultipleOf));
  require(c.expansionFactor >= 0.0 && c.expansionFactor * c.hiddenSize <= kMaxDimension,
          "expansion-factor: expected a positive number, got " +
              std::to_string(c.expansionFactor));
  require(c.expansionFactor == 0.0 || c.intermediateSize == 0,
          "expansion-factor: set together with intermediate-size; NeoX takes one or the other "
          "(\"Must pass either the absolute intermediate size or the relative expansion "
          "factor\"): remove one");
  require(c.expansionFactor == 0.0 || mlpWidths(c).second > 0,
          "expansion-factor: " + std::to_string(c.expansionFactor) + " x hidden-size " +
              std::to_string(c.hiddenSize) + " leaves the MLP no width; raise it");
}

// gpt-j residual, sliding window and query/key norm.
void checkBlockOptions(const GptConfig& c) {
  require(!c.gptjTied || c.gptjResidual,
          "gpt-j-tied: ties the two norms of a gpt-j block, but gpt-j-residual is false (NeoX "
          "then ignores it); set gpt-j-residual: true or gpt-j-tied: false");
  require(c.slidingWindowWidth >= -1,
          "sliding-window-width: expected a width >= 0 or null, got " +
              std::to_string(c.slidingWindowWidth));
  require(!c.qkNorm || c.kvHeads() == c.numAttentionHeads,
          "use-qk-layernorm: NeoX's query/key norm has the queries' shape [heads, head size]; with "
          "num-kv-heads " +
              std::to_string(c.kvHeads()) + " < num-attention-heads " +
              std::to_string(c.numAttentionHeads) +
              " its flash path cannot apply it to the keys and its global path normalises each "
              "repeated key head apart; not implemented here: set use-qk-layernorm: false or "
              "num-kv-heads to num-attention-heads");
}

void checkMlpWidths(const GptConfig& c) {
  const auto [out, in] = mlpWidths(c);
  require(in > 0 && out == (c.gated() ? 2 : 1) * in,
          "intermediate-size/mlp-multiple-of: NeoX's rounding gives dense_h_to_4h " +
              std::to_string(out) + " outputs but dense_4h_to_h " + std::to_string(in) +
              " inputs" + (c.gated() ? " (a gated MLP needs twice as many)" : "") +
              ", which NeoX cannot build either; choose an intermediate-size whose 2/3 is even, "
              "or another mlp-multiple-of");
}

void checkDropoutAndInit(const GptConfig& c) {
  for (auto [key, p] : {std::pair{"attention-dropout", c.attentionDropout},
                        std::pair{"hidden-dropout", c.hiddenDropout}})
    require(p >= 0.0 && p < 1.0,
            std::string(key) + ": expected a probability in [0, 1), got " + std::to_string(p));
  require(c.initMethodStd > 0.0 && std::isfinite(c.initMethodStd),
          "init-method-std: expected a positive number");
}

// Sizes each within bounds can still multiply into a model no machine holds: refuse it here,
// with the count, rather than fail an allocation later.
void checkModelFits(const GptConfig& c) {
  const double h = c.hiddenSize, layers = c.numLayers, vocab = c.paddedVocabSize();
  const double positions = std::max(c.seqLength, c.maxPositionEmbeddings);
  const double ff = c.ffnSize(), ff1 = c.ffnInputSize(), qkv = c.qkvSize();
  const double experts = c.moe.numExperts * h * (c.expertFfnInputSize() + c.expertFfnSize());
  const double params = layers * (h * qkv + h * h + h * (ff1 + ff) + qkv + ff1 + 6.0 * h) +
                        c.moe.moeLayers(c.numLayers) * experts + 2.0 * vocab * h + positions * h;
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

}  // namespace

int GptConfig::paddedVocabSize() const {
  const int64_t d = makeVocabSizeDivisibleBy;
  return static_cast<int>((vocabSize + d - 1) / d * d);
}

bool GptConfig::gated() const {
  switch (activation) {
    case Activation::Geglu:
    case Activation::Reglu:
    case Activation::Swiglu:
    case Activation::Glu:
    case Activation::Bilinear:
      return true;
    case Activation::Gelu:
    case Activation::Relu:
    case Activation::Silu:
    case Activation::Softsign:
    case Activation::Mish:
      break;
  }
  return false;
}

int GptConfig::qkNormParams() const {
  if (!qkNorm) return 0;
  return normWeightSize() + (norm == NormKind::LayerNorm ? hiddenSize : 0);
}

size_t GptConfig::attentionWindow(size_t seq) const {
  return slidingWindowWidth >= 0 ? std::min(seq, static_cast<size_t>(slidingWindowWidth)) : seq;
}

int GptConfig::ffnInputSize() const { return static_cast<int>(mlpWidths(*this).first); }
int GptConfig::ffnSize() const { return static_cast<int>(mlpWidths(*this).second); }

int GptConfig::expertFfnSize() const {
  if (moe.kind == MoeKind::DeepSpeed) return ffnSize();
  return intermediateSize > 0 ? intermediateSize : (4 * hiddenSize + 255) / 256 * 256;
}

double GptConfig::mlpMacsPerToken(int layer) const {
  const double h = hiddenSize, dense = h * (ffnInputSize() + ffnSize());
  if (!moe.isMoeLayer(layer)) return dense;
  const bool residual = moe.kind == MoeKind::DeepSpeed && moe.useResidual;
  return h * moe.numExperts + moe.topK * h * (expertFfnInputSize() + expertFfnSize()) +
         (residual ? dense + 2 * h : 0.0);
}

int GptConfig::expertFfnInputSize() const {
  return moe.kind == MoeKind::DeepSpeed ? ffnInputSize() : expertFfnSize();
}

int GptConfig::rotaryDim() const {
  if (posEmb != PositionEmbedding::Rotary) return 0;
  const int dim = static_cast<int>(headDim() * rotaryPct);
  return dim - dim % 2;
}

void GptConfig::validate() const {
  checkDimensions(*this);
  checkPositionsAndNorms(*this);
  checkKvHeads(*this);
  checkMlpWidthKeys(*this);
  checkBlockOptions(*this);
  checkMlpWidths(*this);
  checkDropoutAndInit(*this);
  moe.validate(numLayers, gated(), gptjResidual);
  checkModelFits(*this);
}

void GptConfig::validateModelParallel(int modelParallelSize) const {
  const int t = modelParallelSize;
  require(t >= 1, "model-parallel-size: expected >= 1, got " + std::to_string(t));
  if (t == 1) return;
  require(!moe.enabled() || moe.numExperts % t == 0,
          "moe-num-experts: " + std::to_string(moe.numExperts) +
              " experts do not split evenly over model-parallel-size " + std::to_string(t) +
              " (each model rank holds experts / size of them, as NeoX's dropless MoE)");
  require(!moe.enabled() || moe.numExperts % (t * moe.expertParallelSize) == 0,
          "moe-expert-parallel-size " + std::to_string(moe.expertParallelSize) +
              " with model-parallel-size " + std::to_string(t) + ": " +
              std::to_string(moe.numExperts) + " experts do not split evenly over " +
              std::to_string(t * moe.expertParallelSize) +
              " ranks (each model rank's share over its expert-parallel group)");
  require(!qkNorm,
          "use-qk-layernorm: not supported with model-parallel-size > 1 (the query/key norm spans "
          "every head of a token; it is not sliced yet)");
  const std::string size = std::to_string(t);
  auto evenly = [&](const std::string& key, int64_t n, const std::string& fix) {
    require(n % t == 0, key + ": " + std::to_string(n) +
                            " does not split evenly over model-parallel-size " + size +
                            " (every model rank holds an equal share); " + fix);
  };
  evenly("num-attention-heads", numAttentionHeads,
         "use a multiple of " + size + " heads, or a model-parallel-size that divides " +
             std::to_string(numAttentionHeads));
  if (numKvHeads > 0)
    evenly("num-kv-heads", numKvHeads,
           "use a multiple of " + size + " kv heads, or a model-parallel-size that divides " +
               std::to_string(numKvHeads));
  const std::string width = intermediateSize > 0  ? "intermediate-size"
                            : expansionFactor > 0 ? "expansion-factor"
                                                  : "hidden-size";
  evenly(width + " (the MLP's inner width after NeoX's rounding)", ffnSize(),
         "choose " + width + " or mlp-multiple-of so that the width is a multiple of " + size);
  if (sequenceParallel)
    evenly("seq-length (sequence-parallel shares each micro-batch's tokens over the model ranks)",
           seqLength, "use a multiple of " + size + ", or sequence-parallel: false");
}

const char* GptConfig::hostOnlyOption(int modelParallel, int sequenceParallel) const {
  return modelParallel > 1             ? "model-parallel-size above 1"
         : sequenceParallel > 1        ? "sequence_parallel_size above 1"
         : moe.enabled()               ? "moe-num-experts above 1"
         : norm == NormKind::ScaleNorm ? "norm: scalenorm"
                                       : nullptr;
}

std::string GptConfig::describe() const {
  std::string s = std::to_string(numLayers) + " layers, hidden " + std::to_string(hiddenSize) +
                  ", " + std::to_string(numAttentionHeads) + " heads, seq " +
                  std::to_string(seqLength) + ", vocab " + std::to_string(paddedVocabSize()) +
                  ", " + positionEmbeddingName(posEmb) + " positions, " + normName(norm) + ", " +
                  activationName(activation);
  if (numKvHeads > 0 && numKvHeads != numAttentionHeads)
    s += ", " + std::to_string(numKvHeads) + " kv heads";
  if (!biasInAttnLinear || !biasInMlp) s += ", no linear biases";
  if (!weightTying) s += ", untied output";
  if (gptjResidual) s += gptjTied ? ", gpt-j residual (tied norms)" : ", gpt-j residual";
  if (slidingWindowWidth >= 0) s += ", sliding window " + std::to_string(slidingWindowWidth);
  if (qkNorm) s += ", qk norm";
  if (checkpointActivations) s += ", activation checkpointing";
  s += moe.describe();
  return s;
}

std::string GptConfig::architecture() const {
  // %.17g: the exact double, so two configs with the same text have the same values.
  auto number = [](double v) {
    char text[32];
    std::snprintf(text, sizeof(text), "%.17g", v);
    return std::string(text);
  };
  std::string s = "gpt num-layers=" + std::to_string(numLayers) +
                  " hidden-size=" + std::to_string(hiddenSize) +
                  " num-attention-heads=" + std::to_string(numAttentionHeads) +
                  " num-kv-heads=" + std::to_string(kvHeads()) +
                  " padded-vocab-size=" + std::to_string(paddedVocabSize()) +
                  " pos-emb=" + positionEmbeddingName(posEmb);
  if (posEmb == PositionEmbedding::Learned)
    s += " max-position-embeddings=" + std::to_string(maxPositionEmbeddings);
  if (posEmb == PositionEmbedding::Rotary)
    s += " rotary-dims=" + std::to_string(rotaryDim()) + " rotary-emb-base=" + number(rotaryEmbBase);
  s += std::string(" norm=") + normName(norm);
  const double epsilon = norm == NormKind::LayerNorm ? layernormEpsilon
                         : norm == NormKind::RmsNorm ? rmsNormEpsilon
                                                     : scalenormEpsilon;
  s += " norm-epsilon=" + number(epsilon);
  s += std::string(" activation=") + activationName(activation) +
       " ffn-size=" + std::to_string(ffnSize()) +
       " bias-in-norms=" + std::to_string(normHasBias()) +
       " bias-in-attn-linear=" + std::to_string(biasInAttnLinear) +
       " bias-in-mlp=" + std::to_string(biasInMlp) +
       " weight-tying=" + std::to_string(weightTying) +
       " gpt-j-residual=" + std::to_string(gptjResidual) +
       " gpt-j-tied=" + std::to_string(gptjResidual && gptjTied) +
       " sliding-window-width=" + std::to_string(slidingWindowWidth) +
       " use-qk-layernorm=" + std::to_string(qkNorm);
  s += moe.architecture();
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

const char* normName(NormKind n) {
  switch (n) {
    case NormKind::RmsNorm:
      return "rmsnorm";
    case NormKind::ScaleNorm:
      return "scalenorm";
    case NormKind::LayerNorm:
      break;
  }
  return "layernorm";
}

const char* activationName(Activation a) {
  switch (a) {
    case Activation::Geglu:
      return "geglu";
    case Activation::Relu:
      return "relu";
    case Activation::Silu:
      return "silu";
    case Activation::Reglu:
      return "reglu";
    case Activation::Swiglu:
      return "swiglu";
    case Activation::Glu:
      return "glu";
    case Activation::Bilinear:
      return "bilinear";
    case Activation::Softsign:
      return "softsign";
    case Activation::Mish:
      return "mish";
    case Activation::Gelu:
      break;
  }
  return "gelu";
}

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
    case InitMethod::SingleResidualScaledNormal:
      return "single_residual_scaled_normal";
    case InitMethod::XavierNormal:
      return "xavier_normal";
    case InitMethod::XavierUniform:
      return "xavier_uniform";
  }
  return "normal";
}

}  // namespace ds::runtime
