// The GPT model's parameter table, initialisation and the layer-by-layer pass through
// LayerAccess: its set-up and the pipeline stages' entry points here, its pieces (embedding,
// blocks in gpt_block.cc, head with the fused cross-entropy) in gpt_passes.cc.
// Sliced over a model group (GptPlacement::modelSize t > 1), as Megatron slices: the word
// embeddings and the output layer by vocabulary rows (vocab-parallel lookup, column-parallel
// logits and the vocab-parallel cross-entropy, which never gathers them; the head's input
// gradient summed over the group), QKV by heads and dense_h_to_4h by columns (of each half when
// gated), attention.dense and dense_4h_to_h by rows with their biases replicated. Positions, norms
// and those biases are whole on every rank (their gradients come out identical on every rank, so
// only model rank 0 counts them in the gradient norm). t = 1 runs the unsliced code unchanged.
#include "runtime/model/gpt.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "common/error.h"
#include "common/fnv1a.h"
#include "kernels/cpu/philox.h"
#include "kernels/cpu/transformer_kernels.h"
#include "runtime/model/gpt_block.h"
#include "runtime/model/gpt_pass.h"
#include "runtime/model/sequence_parallel.h"
#include "runtime/parallel/tensor_slicing.h"
#include "runtime/parallel/vocab_parallel_embedding.h"

namespace ds::runtime {

using namespace gpt_pass;

namespace {

// The profiler's module type of the MLP's activation, as PyTorch's class names spell them.
const char* activationModuleType(Activation a) {
  switch (a) {
    case Activation::Geglu:
      return "GeGLU";
    case Activation::Relu:
      return "ReLU";
    case Activation::Silu:
      return "SiLU";
    case Activation::Reglu:
      return "ReGLU";
    case Activation::Swiglu:
      return "SwiGLU";
    case Activation::Glu:
      return "GLU";
    case Activation::Bilinear:
      return "Bilinear";
    case Activation::Softsign:
      return "Softsign";
    case Activation::Mish:
      return "Mish";
    case Activation::Gelu:
      break;
  }
  return "GeLU";
}

// The standard deviation of a weight of [fanOut, fanIn]; xavier_uniform's is its bound / sqrt(3).
float initStd(InitMethod m, const GptConfig& c, double fanIn, double fanOut) {
  switch (m) {
    case InitMethod::Normal:
      return static_cast<float>(c.initMethodStd);
    case InitMethod::ScaledNormal:
      return static_cast<float>(c.initMethodStd / std::sqrt(2.0 * c.numLayers));
    case InitMethod::SingleResidualScaledNormal:  // NeoX's num_residuals_per_layer = 1
      return static_cast<float>(c.initMethodStd / std::sqrt(static_cast<double>(c.numLayers)));
    case InitMethod::XavierNormal:
      return static_cast<float>(std::sqrt(2.0 / (fanIn + fanOut)));
    case InitMethod::XavierUniform:
      return static_cast<float>(std::sqrt(2.0 / (fanIn + fanOut)));
    case InitMethod::SmallInit:
      return static_cast<float>(std::sqrt(2.0 / (5.0 * c.hiddenSize)));
    case InitMethod::WangInit:
      return static_cast<float>(2.0 / c.numLayers / std::sqrt(static_cast<double>(c.hiddenSize)));
  }
  return static_cast<float>(c.initMethodStd);
}

// The config as a model rank builds it: checked, its vocabulary padded for the model group.
GptConfig placedConfig(GptConfig config, const GptPlacement& placement) {
  const int t = placement.modelSize, rank = placement.modelRank;
  if (t < 1 || rank < 0 || rank >= t)
    throw Error("GPT placement: model rank " + std::to_string(rank) + " of a model-parallel size " +
                std::to_string(t));
  if (t > 1) {
    config.validateModelParallel(t);  // the parser's own refusals, should a caller skip it
    // Every model rank needs the same number of vocabulary rows. NeoX always pads to
    // make-vocab-size-divisible-by x model-parallel-size, which makes the model (its padded
    // logits take part in the softmax) differ with the model-parallel size; here the one-rank
    // padding stays wherever the slices divide it (always for a power-of-two size with NeoX's
    // default 128), so a job's model and checkpoints are the same at every size.
    if (config.paddedVocabSize() % t != 0) config.makeVocabSizeDivisibleBy *= t;
  }
  config.validate();
  return config;
}

// A replicated tensor's gradient is the same on every model rank: rank 0 counts it in the norm.
enum Kind { kWhole, kReplicated };
// A sliced tensor's place in the full one (ParamSpec::slice) and its local row width.
struct Slicing {
  SliceMap map;
  size_t localWidth = 0;
};

// The parameter table in NeoX's order, as one rank holds it: only the layers [first, end) of its
// stage, each tensor sliced as Megatron slices it over the model group (whole at size 1).
class ParameterTable {
 public:
  ParameterTable(const GptConfig& c, int rank, int size, int first, int end,
                 const gpt::BlockSlice& slice, const VocabSlice& vocab)
      : c_(c),
        rank_(rank),
        sliced_(size > 1),
        first_(first),
        end_(end),
        slice_(slice),
        vocab_(vocab),
        qkvSlice_(qkvRows(c.numAttentionHeads, c.kvHeads(), c.headDim(), rank, size)),
        fc1Slice_{{slice.firstFfn, slice.ffn}} {
    if (c.gated()) fc1Slice_.push_back({c.ffnSize() + slice.firstFfn, slice.ffn});  // [x | gate]
  }

  void addEmbedding() {
    add("embed.word_embeddings.weight", {paddedVocab(), hidden()}, true, 0, wordEmbeddingRows());
    if (c_.posEmb == PositionEmbedding::Learned)
      add("embed.position_embeddings.weight", {c_.maxPositionEmbeddings, hidden()}, true, 0, {},
          kReplicated);
  }

  void addBlock(int l);
  // A MoE block's experts (the ones this rank holds: gpt::BlockSlice) as the stage's local layer
  // `layer`, after the head: the model's expert layers (Gpt::expertLayer).
  void addExperts(int l, int layer);

  void addHead(bool tiedCopy) {
    const int head = c_.numLayers + 1;
    add("final_layer_norm.weight", {normWeights()}, false, head, {}, kReplicated);
    if (c_.normHasBias()) add("final_layer_norm.bias", {hidden()}, false, head, {}, kReplicated);
    if (!c_.weightTying)
      add("embed_out.weight", {paddedVocab(), hidden()}, true, head, wordEmbeddingRows());
    if (tiedCopy) {
      // The tied copy, sliced by vocabulary rows as the first stage's: that one counts in the
      // gradient norm, this one does not (on any model rank).
      add("embed.word_embeddings.weight", {paddedVocab(), hidden()}, true, head,
          wordEmbeddingRows());
      specs.back().countInGradNorm = false;
    }
  }

  std::vector<ParamSpec> specs;
  std::vector<std::vector<int64_t>> fullShapes;  // by spec: the one-rank shape

 private:
  void add(std::string name, std::vector<int64_t> shape, bool decay, int layer,
           Slicing slicing = {}, Kind kind = kWhole) {
    if (layer < first_ || layer >= end_) return;  // another stage's
    append(std::move(name), std::move(shape), decay, layer - first_, std::move(slicing), kind);
  }
  // A tensor of the stage's local layer `layer`.
  void append(std::string name, std::vector<int64_t> shape, bool decay, int layer,
              Slicing slicing = {}, Kind kind = kWhole) {
    ParamSpec s;
    s.name = std::move(name);
    s.weightDecay = decay;
    s.layer = layer;
    fullShapes.push_back(shape);
    if (!slicing.map.whole()) {  // sliced: the local shape from the runs
      const auto local = static_cast<int64_t>(slicing.map.localNumel());
      const auto width = static_cast<int64_t>(slicing.localWidth);
      shape = shape.size() == 1 ? std::vector<int64_t>{local}
                                : std::vector<int64_t>{local / width, width};
      s.slice = std::move(slicing.map);
    }
    s.shape = std::move(shape);
    s.countInGradNorm = !(sliced_ && kind == kReplicated && rank_ > 0);
    s.numel = 1;
    for (int64_t d : s.shape) s.numel *= static_cast<size_t>(d);
    s.offset = specs.empty() ? 0 : specs.back().offset + specs.back().numel;
    specs.push_back(std::move(s));
  }

  // Slice descriptions (none at model size 1, which keeps the unsliced init path): row ranges
  // of a [rows, width] tensor (one run each), or columns [colBegin, + localWidth) of every row.
  Slicing byRows(const std::vector<SliceRange>& ranges, size_t fullRows, size_t width) const {
    Slicing f;
    if (!sliced_) return f;
    f.map.fullNumel = fullRows * width;
    for (const SliceRange& r : ranges) f.map.runs.push_back({r.begin * width, r.count * width});
    f.localWidth = width;
    return f;
  }
  Slicing byColumns(size_t rows, size_t width, size_t colBegin, size_t localWidth) const {
    Slicing f;
    if (!sliced_) return f;
    f.map.fullNumel = rows * width;
    f.map.runs.push_back({colBegin, localWidth, rows, width});
    f.localWidth = localWidth;
    return f;
  }
  Slicing wordEmbeddingRows() const {
    return byRows({vocab_.rows}, c_.paddedVocabSize(), c_.hiddenSize);
  }

  int64_t hidden() const { return static_cast<int64_t>(c_.hiddenSize); }
  int64_t paddedVocab() const { return static_cast<int64_t>(c_.paddedVocabSize()); }
  int64_t normWeights() const { return static_cast<int64_t>(c_.normWeightSize()); }

  const GptConfig& c_;
  int rank_;
  bool sliced_;
  int first_, end_;
  gpt::BlockSlice slice_;
  VocabSlice vocab_;
  std::vector<SliceRange> qkvSlice_, fc1Slice_;
};

void ParameterTable::addBlock(int l) {
  const std::string p = "layers." + std::to_string(l) + ".";
  const int layer = l + 1;
  const size_t h = c_.hiddenSize, d = c_.headDim();
  const bool normBias = c_.normHasBias(), attnBias = c_.biasInAttnLinear, mlpBias = c_.biasInMlp;
  const auto ff = static_cast<int64_t>(c_.ffnSize()), ff1 = static_cast<int64_t>(c_.ffnInputSize()),
             qkv = static_cast<int64_t>(c_.qkvSize());
  add(p + "input_layernorm.weight", {normWeights()}, false, layer, {}, kReplicated);
  if (normBias) add(p + "input_layernorm.bias", {hidden()}, false, layer, {}, kReplicated);
  if (c_.qkNorm) {  // NeoX's norm([heads, head size]): ScaleNorm's is one gain
    const auto heads = static_cast<int64_t>(c_.numAttentionHeads),
               headDim = static_cast<int64_t>(d);
    const std::vector<int64_t> shape =
        c_.norm == NormKind::ScaleNorm ? std::vector<int64_t>{1} : std::vector{heads, headDim};
    add(p + "attention.qk_layernorm.weight", shape, false, layer);
    if (c_.norm == NormKind::LayerNorm)
      add(p + "attention.qk_layernorm.bias", {heads, headDim}, false, layer);
  }
  add(p + "attention.query_key_value.weight", {qkv, hidden()}, true, layer,
      byRows(qkvSlice_, c_.qkvSize(), h));
  if (attnBias)
    add(p + "attention.query_key_value.bias", {qkv}, false, layer,
        byRows(qkvSlice_, c_.qkvSize(), 1));
  add(p + "attention.dense.weight", {hidden(), hidden()}, true, layer,
      byColumns(h, h, slice_.firstHead * d, slice_.heads * d));
  if (attnBias) add(p + "attention.dense.bias", {hidden()}, false, layer, {}, kReplicated);
  add(p + "post_attention_layernorm.weight", {normWeights()}, false, layer, {}, kReplicated);
  if (normBias) add(p + "post_attention_layernorm.bias", {hidden()}, false, layer, {}, kReplicated);
  // A MoE layer (no slicing: refused with model-parallel-size > 1) in gpt::blockLayout's order:
  // router, experts, DeepSpeed's residual MLP and its coefficient.
  const bool moe = c_.moe.isMoeLayer(l);
  const bool denseMlp = !moe || (c_.moe.kind == MoeKind::DeepSpeed && c_.moe.useResidual);
  if (moe)  // every model rank routes the same tokens
    add(p + "mlp.router.weight", {c_.moe.numExperts, hidden()}, true, layer, {}, kReplicated);
  if (!denseMlp) return;
  const std::string mlp = p + (moe ? "mlp.mlp." : "mlp.");
  add(mlp + "dense_h_to_4h.weight", {ff1, hidden()}, true, layer,
      byRows(fc1Slice_, c_.ffnInputSize(), h));
  if (mlpBias)
    add(mlp + "dense_h_to_4h.bias", {ff1}, false, layer, byRows(fc1Slice_, c_.ffnInputSize(), 1));
  add(mlp + "dense_4h_to_h.weight", {hidden(), ff}, true, layer,
      byColumns(h, c_.ffnSize(), slice_.firstFfn, slice_.ffn));
  if (mlpBias) add(mlp + "dense_4h_to_h.bias", {hidden()}, false, layer, {}, kReplicated);
  if (moe) {
    add(p + "mlp.coefficient.weight", {2, hidden()}, true, layer, {}, kReplicated);
    add(p + "mlp.coefficient.bias", {2}, false, layer, {}, kReplicated);
  }
}

void ParameterTable::addExperts(int l, int layer) {
  if (l + 1 < first_ || l + 1 >= end_) return;  // another stage's block
  const auto xff = static_cast<int64_t>(c_.expertFfnSize()),
             xff1 = static_cast<int64_t>(c_.expertFfnInputSize());
  const bool expertBias = c_.moe.kind == MoeKind::DeepSpeed && c_.biasInMlp;  // NeoX's: none
  const std::string p = "layers." + std::to_string(l) + ".mlp.experts.";
  for (size_t e = slice_.firstExpert; e < slice_.firstExpert + slice_.experts; ++e) {
    const std::string x = p + std::to_string(e) + ".";
    append(x + "dense_h_to_4h.weight", {xff1, hidden()}, true, layer);
    if (expertBias) append(x + "dense_h_to_4h.bias", {xff1}, false, layer);
    append(x + "dense_4h_to_h.weight", {hidden(), xff}, true, layer);
    if (expertBias) append(x + "dense_4h_to_h.bias", {hidden()}, false, layer);
  }
  for (size_t t = specs.size(); t-- > 0 && specs[t].layer == layer;) specs[t].expert = true;
}

// NeoX's fixed position table [positions, h]: inv_freq = 10000^(-2i / h);
// [sin(t * f) | cos(t * f)].
std::vector<float> sinusoidTable(size_t positions, size_t h) {
  std::vector<float> table(positions * h, 0.0f);
  for (size_t t = 0; t < positions; ++t)
    for (size_t i = 0; i < h / 2; ++i) {
      const float f = static_cast<float>(
          1.0 / std::pow(10000.0, static_cast<double>(2 * i) / static_cast<double>(h)));
      const float angle = static_cast<float>(t) * f;
      table[t * h + i] = std::sin(angle);
      table[t * h + h / 2 + i] = std::cos(angle);
    }
  return table;
}

}  // namespace

Gpt::Gpt(GptConfig config, GptPlacement placement, kernels::Accelerator& accelerator)
    : config_(placedConfig(std::move(config), placement)),
      placement_(placement),
      acc_(&accelerator) {
  const int layers = config_.numLayers + 2;
  first_ = placement.firstLayer;
  end_ = placement.endLayer < 0 ? layers : placement.endLayer;
  if (first_ < 0 || first_ >= end_ || end_ > layers)
    throw Error("GPT placement: layers [" + std::to_string(first_) + ", " + std::to_string(end_) +
                ") are not a non-empty range of the model's " + std::to_string(layers) +
                " (0 the embedding, 1.." + std::to_string(config_.numLayers) + " the blocks, " +
                std::to_string(layers - 1) + " the head)");
  blockBegin_ = std::clamp(first_ - 1, 0, config_.numLayers);
  blockEnd_ = std::clamp(end_ - 1, 0, config_.numLayers);
  tiedCopy_ = config_.weightTying && first_ > 0 && lastStage();
  const int t = placement_.modelSize, rank = placement_.modelRank;
  refuseHostOnlyOptions();
  if (placement_.sequence && placement_.sequence->size() > 1) {
    const int u = placement_.sequence->size();
    if (t > 1 || !whole())
      throw Error("sequence_parallel_size: not implemented with model-parallel-size or "
                  "pipe-parallel-size above 1");
    if (config_.numAttentionHeads % u != 0 || config_.kvHeads() % u != 0)
      throw Error("sequence_parallel_size " + std::to_string(u) + ": num-attention-heads " +
                  std::to_string(config_.numAttentionHeads) + " and num-kv-heads " +
                  std::to_string(config_.kvHeads()) +
                  " must divide by it (each sequence rank attends with 1/" + std::to_string(u) +
                  " of the heads)");
  }
  const gpt::BlockSlice slice =
      gpt::blockSlice(config_, rank, t, placement_.model, placement_.experts);
  const VocabSlice vocabRows = vocabSlice(config_.paddedVocabSize(), rank, t);

  ParameterTable table(config_, rank, t, first_, end_, slice, vocabRows);
  table.addEmbedding();
  for (int l = 0; l < config_.numLayers; ++l) table.addBlock(l);
  table.addHead(tiedCopy_);
  // Each MoE block's experts: a layer of their own after the head, so that the engine can keep
  // them apart (expert parallelism reduces and partitions them over the expert-data group).
  expertLayer_.assign(static_cast<size_t>(config_.numLayers), -1);
  int nextLayer = end_ - first_;
  for (int l = blockBegin_; l < blockEnd_; ++l)
    if (config_.moe.isMoeLayer(l)) {
      expertLayer_[static_cast<size_t>(l)] = nextLayer;
      table.addExperts(l, nextLayer++);
    }
  layers_ = nextLayer;
  specs_ = std::move(table.specs);
  fullShapes_ = std::move(table.fullShapes);

  acts_ = std::make_unique<GptActivations>(config_, *acc_, slice, vocabRows);
  const size_t positions = static_cast<size_t>(maxPositions());
  if (config_.posEmb == PositionEmbedding::Rotary) {
    acts_->runner.prepareRotary(positions);
    if (config_.moe.enabled()) acts_->moeRunner.prepareRotary(positions);
  }
  if (config_.posEmb == PositionEmbedding::Sinusoidal)
    kernels::assignHost(*acc_, acts_->sinusoid, sinusoidTable(positions, config_.hiddenSize));
  acts_->buffers.resize(1);
  acts_->buffers[0].blocks.resize(static_cast<size_t>(blockEnd_ - blockBegin_));
}

Gpt::~Gpt() = default;

void Gpt::refuseHostOnlyOptions() const {
  if (acc_->hostAccessible()) return;
  const int sequence = placement_.sequence ? placement_.sequence->size() : 1;
  if (const char* hostOnly = config_.hostOnlyOption(placement_.modelSize, sequence))
    throw Error(std::string("GPT on ") + acc_->deviceName() + ": " + hostOnly +
                " runs on the CPU only so far; use device cpu");
}

int Gpt::maxPositions() const {
  if (config_.posEmb == PositionEmbedding::Learned) return config_.maxPositionEmbeddings;
  return std::max(config_.seqLength, config_.maxPositionEmbeddings);
}

void Gpt::initTensorRange(const ParamSpec& s, float* p, uint64_t seed, size_t begin,
                          size_t end) const {
  const auto endsWith = [&](const char* suffix) {
    const size_t n = std::strlen(suffix);
    return s.name.size() >= n && s.name.compare(s.name.size() - n, n, suffix) == 0;
  };
  // Norm weights start at one, biases at zero (the qk norm's are [heads, head size]).
  if (s.shape.size() == 1 || endsWith("qk_layernorm.weight") || endsWith("qk_layernorm.bias")) {
    const float v = endsWith("layernorm.weight") || endsWith("layer_norm.weight") ? 1.0f : 0.0f;
    std::fill(p, p + (end - begin), v);
    return;
  }
  const bool output = endsWith("attention.dense.weight") || endsWith("dense_4h_to_h.weight");
  const InitMethod method = output ? config_.outputLayerInitMethod : config_.initMethod;
  // A slice draws the full tensor's elements (s.slice), with the full tensor's fans (its shape
  // found by name: callers pass copies of the table, such as the engine's).
  const std::vector<int64_t>* shape = &s.shape;
  if (!s.slice.whole())
    for (size_t i = 0; i < specs_.size(); ++i)
      if (specs_[i].name == s.name) shape = &fullShapes_[i];
  size_t fullNumel = 1;
  for (int64_t dim : *shape) fullNumel *= static_cast<size_t>(dim);
  // PyTorch's fans of a [out, in] weight (an embedding's [vocab, h] alike).
  const double fanOut = static_cast<double>((*shape)[0]),
               fanIn = static_cast<double>(fullNumel) / fanOut;
  const float std = initStd(method, config_, fanIn, fanOut);
  // Philox4x32-10 with key = seed and counter = (block, stream = the name's hash): each element
  // depends on the seed, the tensor's name and its index only, so adding a tensor changes no
  // other, and a rank can draw any range of a tensor alone (docs/gpt-trainer.md has the mapping).
  const uint64_t stream = fnv1a64(s.name.data(), s.name.size());
  // Writes out[0, count) with the full tensor's elements [first, first + count).
  auto draw = [&](float* out, size_t first, size_t count) {
    if (method == InitMethod::XavierUniform) {
      // U(-a, a): element e is the top 24 bits of word e % 4 of block e / 4.
      const double bound = std::sqrt(3.0) * std;
      kernels::PhiloxWords words{};
      for (size_t e = first; e < first + count; ++e) {
        if (e == first || e % 4 == 0) words = kernels::philoxBlock(seed, stream, e / 4);
        const double u = static_cast<double>(words[e % 4] >> 8) * 0x1.0p-24;  // [0, 1)
        out[e - first] = static_cast<float>((2.0 * u - 1.0) * bound);
      }
      return;
    }
    // Host memory (the Model contract), so the CPU's kernel on every device.
    kernels::transformerKernels().normalFromPhilox(out, count, seed, stream, first, std);
  };
  if (s.slice.whole()) {
    draw(p, begin, end - begin);
    return;
  }
  // Repeat by repeat of the runs: each is one contiguous piece of the full tensor.
  size_t localBegin = 0;
  for (const StridedRun& run : s.slice.runs)
    for (uint64_t i = 0; i < run.repeat; ++i, localBegin += run.count) {
      const size_t from = std::max<size_t>(begin, localBegin),
                   to = std::min<size_t>(end, localBegin + run.count);
      if (from < to)
        draw(p + (from - begin), run.fullBegin + i * run.stride + (from - localBegin), to - from);
    }
}

void Gpt::checkBatch(const Batch& batch, size_t& seq) const {
  if (batch.size == 0 || batch.inputIds.empty() || batch.inputIds.size() % batch.size != 0)
    throw Error("GPT batch: " + std::to_string(batch.inputIds.size()) + " token ids for " +
                std::to_string(batch.size) + " samples; expected samples x sequence length");
  seq = batch.inputIds.size() / batch.size;
  if (seq > static_cast<size_t>(maxPositions()))
    throw Error("GPT batch: sequences of " + std::to_string(seq) + " tokens exceed the model's " +
                std::to_string(maxPositions()) + " positions");
  const int32_t vocab = config_.vocabSize;
  for (int32_t id : batch.inputIds)
    if (id < 0 || id >= vocab)
      throw Error("GPT batch: token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                  std::to_string(vocab) + "); was the data tokenised with another tokenizer?");
}

float Gpt::forwardBackward(const Batch& batch, LayerAccess& access, float gradScale) {
  return run(batch, access, gradScale, Pass::Train, nullptr);
}

float Gpt::evaluate(const Batch& batch, LayerAccess& access) {
  return run(batch, access, 0.0f, Pass::Evaluate, nullptr);
}

std::vector<float> Gpt::nextTokenLogits(const std::vector<int32_t>& tokens, LayerAccess& access) {
  Batch batch;
  batch.size = 1;
  batch.inputIds = tokens;
  std::vector<float> logits;
  run(batch, access, 0.0f, Pass::Logits, &logits);
  return logits;
}

size_t Gpt::peakActivationBytes() const { return acts_->peakBytes; }

void Gpt::countMoe(const gpt::MoeStatistics& s) {
  MoeWindow& w = moeWindow_;
  if (config_.moe.kind == MoeKind::DeepSpeed) w.moeLoss += config_.moe.lossCoeff * s.auxLoss;
  w.minTokens = std::min(w.minTokens, s.minTokens);  // a fresh window starts at the maximum
  w.maxTokens = std::max(w.maxTokens, s.maxTokens);
  w.dropped += s.dropped;
}

Gpt::MoeWindow Gpt::takeMoeWindow() {
  MoeWindow w = moeWindow_;
  if (w.passes > 0)
    w.moeLoss /= static_cast<double>(w.passes);
  else
    w.minTokens = 0;
  moeWindow_ = {};
  return w;
}

Gpt::Macs Gpt::forwardMacsPerSample(size_t seq) const {
  const double T = static_cast<double>(seq), h = config_.hiddenSize, L = config_.numLayers;
  Macs m;
  m.attentionProjections = L * T * (h * config_.qkvSize() + h * h);
  // Q K^T and P V over the whole T x T matrix, as Megatron's and DeepSpeed's flops formulas count
  // them: flash attention skips the tiles no query sees (about half at long sequences).
  m.attentionScores = L * 2.0 * T * T * h;
  for (int l = 0; l < config_.numLayers; ++l) m.mlp += T * config_.mlpMacsPerToken(l);
  m.head = T * h * config_.paddedVocabSize();
  return m;
}

GptPass Gpt::beginPass(const Batch& batch, Pass pass) {
  GptPass P{batch};
  checkBatch(batch, P.seq);
  const bool train = pass == Pass::Train;
  if (lastStage() && pass != Pass::Logits && batch.targetIds.size() != batch.inputIds.size())
    throw Error("GPT batch: " + std::to_string(batch.targetIds.size()) + " targets for " +
                std::to_string(batch.inputIds.size()) + " inputs");
  size_t counted = 0;  // targets in the loss: a negative one is masked (NeoX's label -100)
  for (int32_t id : batch.targetIds) {
    if (id >= config_.vocabSize)
      throw Error("GPT batch: target id " + std::to_string(id) + " is outside the vocabulary");
    if (id >= 0) ++counted;
  }
  if (train && (config_.attentionDropout > 0 || config_.hiddenDropout > 0) &&
      batch.sampleIds.size() != batch.size)
    throw Error("GPT batch: dropout needs one sample id per sample");
  if (train && config_.moe.drawsNoise() && batch.sampleIds.size() != batch.size)
    throw Error("GPT batch: the MoE gating's random draws need one sample id per sample");
  // Sequence parallelism shards a training or evaluation pass's rows over the model group (the
  // pipeline stages pass the shards); generation, whose prompt need not divide, runs every row on
  // every rank.
  P.shape = pass != Pass::Logits && config_.sequenceParallel
                ? gpt::sequenceShard(batch.size, P.seq, modelGroup())
                : gpt::wholeRows(batch.size, P.seq);
  // Each rank holds only its experts: every pass, generation too, runs them over the group.
  if (placement_.experts && placement_.experts->size() > 1) P.shape.experts = placement_.experts;
  P.train = train;
  P.logits = pass == Pass::Logits;
  P.checkpointing = train && config_.checkpointActivations;
  // A MoE layer tells training from evaluation by the key's presence (moe_layer.h).
  P.dropout =
      train && (config_.attentionDropout > 0 || config_.hiddenDropout > 0 || config_.moe.enabled());
  P.counted = counted;
  P.keys = gpt::DropoutKey{&batch.sampleIds, 0};
  P.times = profiling_ && train ? moduleSeconds_.data() : nullptr;
  return P;
}

float* Gpt::blockInput(GptBuffer& B, size_t rows) {
  return sized(*acc_, blockEnd_ > blockBegin_ ? B.blocks[0].input : B.last,
               rows * config_.hiddenSize);
}

void Gpt::deviceIds(GptPass& P, GptBuffer& B, bool upload) {
  if (upload) {
    kernels::assignHost(*acc_, B.inputIds, P.batch.inputIds);
    kernels::assignHost(*acc_, B.targetIds, P.batch.targetIds);
  }
  P.inputIds = B.inputIds.data();
  P.targetIds = B.targetIds.empty() ? nullptr : B.targetIds.data();
}

float Gpt::run(const Batch& batch, LayerAccess& access, float gradScale, Pass pass,
               std::vector<float>* lastLogits) {
  if (!whole())
    throw Error("GPT: this rank holds the pipeline stage of layers [" + std::to_string(first_) +
                ", " + std::to_string(end_) + "), which runs through the engine's pipe schedule "
                "(trainBatch / evalBatch), not a whole-model pass");
  // Ulysses: a training or evaluation pass runs this rank's positions of every sample.
  Communicator* ulysses = placement_.sequence && placement_.sequence->size() > 1 &&
                                  pass != Pass::Logits
                              ? placement_.sequence
                              : nullptr;
  const Batch& used = ulysses ? ulyssesBatch(batch, *ulysses) : batch;
  GptPass P = beginPass(used, pass);
  if (ulysses) {
    P.shape.ulysses = ulysses;
    P.shape.fullSeq = P.seq * static_cast<size_t>(ulysses->size());
    P.shape.positionOffset = P.seq * static_cast<size_t>(ulysses->rank());
  }
  GptBuffer& B = acts_->buffers[0];
  deviceIds(P, B, true);
  P.forwardStart = Clock::now();
  embedForward(P, access, blockInput(B, P.shape.local));
  blocksForward(P, B, access);
  const float loss = headPass(P, B, access, gradScale, lastLogits);
  if (!P.train) return loss;
  if (config_.moe.kind == MoeKind::DeepSpeed)  // loss + moe-loss-coeff x sum of the layers' l_aux
    acts_->moeRunner.setAuxLossGradient(config_.moe.lossCoeff * gradScale);
  blocksBackward(P, B, access);
  embedBackward(P, access);
  return loss;
}

size_t Gpt::boundaryElements(const Batch& batch) const {
  // Sequence parallel: each model rank passes its share of the rows (sequenceShard's).
  const size_t t = config_.sequenceParallel && placement_.model
                       ? static_cast<size_t>(placement_.model->size())
                       : 1;
  return batch.inputIds.size() / t * static_cast<size_t>(config_.hiddenSize);
}

std::vector<std::string> Gpt::tiedParameters() const {
  // The embedding's stage and the head's, when they are two.
  if (config_.weightTying && firstStage() != lastStage()) return {"embed.word_embeddings.weight"};
  return {};
}

void Gpt::setPipeBuffers(int buffers) {
  if (buffers < 1) throw Error("GPT: " + std::to_string(buffers) + " pipe buffers; need at least 1");
  acts_->buffers.resize(static_cast<size_t>(buffers));
  for (GptBuffer& B : acts_->buffers) B.blocks.resize(static_cast<size_t>(blockEnd_ - blockBegin_));
}

float Gpt::stageForward(int buffer, const Batch& batch, const float* input, float* output,
                        LayerAccess& access, float gradScale, bool train) {
  GptBuffer& B = acts_->buffers.at(static_cast<size_t>(buffer));
  B.batch = batch;  // the backward reads its ids and sample ids after later forwards
  GptPass P = beginPass(B.batch, train ? Pass::Train : Pass::Evaluate);
  deviceIds(P, B, true);
  if (train && config_.moe.kind == MoeKind::DeepSpeed)  // this stage's layers' l_aux, as run()
    acts_->moeRunner.setAuxLossGradient(config_.moe.lossCoeff * gradScale);
  P.forwardStart = Clock::now();
  const size_t n = P.shape.local * static_cast<size_t>(config_.hiddenSize);
  float* x = blockInput(B, P.shape.local);
  constexpr auto kDeviceCopy = kernels::CopyKind::DeviceToDevice;
  if (firstStage())
    embedForward(P, access, x);
  else
    acc_->copy(x, input, n * sizeof(float), kDeviceCopy, acc_->currentStream());
  blocksForward(P, B, access);
  if (!lastStage()) {
    acc_->copy(output, B.last.data(), n * sizeof(float), kDeviceCopy, acc_->currentStream());
    return 0.0f;
  }
  const float loss = headPass(P, B, access, gradScale, nullptr);
  if (train) std::swap(acts_->dy, B.grad);  // the head's gradient waits for this buffer's backward
  return loss;
}

void Gpt::stageBackward(int buffer, const float* outputGrad, float* inputGrad,
                        LayerAccess& access) {
  GptBuffer& B = acts_->buffers.at(static_cast<size_t>(buffer));
  GptPass P = beginPass(B.batch, Pass::Train);
  deviceIds(P, B, false);  // uploaded by its forward
  const size_t n = P.shape.local * static_cast<size_t>(config_.hiddenSize);
  if (lastStage())
    std::swap(acts_->dy, B.grad);
  else
    kernels::assignDevice(*acc_, acts_->dy, outputGrad, n);
  blocksBackward(P, B, access);
  if (firstStage())
    embedBackward(P, access);
  else
    acc_->copy(inputGrad, acts_->dy.data(), n * sizeof(float), kernels::CopyKind::DeviceToDevice,
               acc_->currentStream());
}

void Gpt::setProfiling(bool on) {
  profiling_ = on;
  if (on) moduleSeconds_.assign(blockModule(config_.numLayers) + 2, 0.0);
}

std::vector<ModuleProfile> Gpt::profileModules(size_t samples, size_t seq) const {
  const double N = static_cast<double>(samples * seq), T = static_cast<double>(seq);
  const double h = config_.hiddenSize, vocab = config_.paddedVocabSize();
  const double ff = config_.ffnSize(), ff1 = config_.ffnInputSize();
  const gpt::BlockLayout layout = gpt::blockLayout(config_);
  const double qkvOut = config_.qkvSize();
  const char* normType = config_.norm == NormKind::LayerNorm ? "LayerNorm"
                         : config_.norm == NormKind::RmsNorm ? "RMSNorm"
                                                             : "ScaleNorm";
  const double normParams = config_.normWeightSize() + (config_.normHasBias() ? h : 0);
  const double attnBias = config_.biasInAttnLinear ? 1 : 0, mlpBias = config_.biasInMlp ? 1 : 0;
  const double qkvParams = qkvOut * h + attnBias * qkvOut, denseParams = h * h + attnBias * h;
  // The qk norm's parameters count under attention.core, where it normalises q and k.
  const double qkNormParams = config_.qkNormParams();
  const double fc1Params = ff1 * h + mlpBias * ff1, fc2Params = h * ff + mlpBias * h;
  std::vector<ModuleProfile> m(blockModule(config_.numLayers) + 2);
  auto set = [&](size_t i, std::string name, std::string type, int depth, int parent,
                 double params, double macs) {
    m[i] = {std::move(name), std::move(type), depth, parent, params, macs,
            i < moduleSeconds_.size() ? moduleSeconds_[i] : 0.0};
  };
  const double embedParams =
      vocab * h + (config_.posEmb == PositionEmbedding::Learned ? config_.maxPositionEmbeddings * h : 0);
  set(kEmbedModule, "embed", "Embedding", 1, 0, embedParams, 0);
  double totalParams = embedParams, totalMacs = 0;
  for (size_t l = 0; l < static_cast<size_t>(config_.numLayers); ++l) {
    const size_t b = blockModule(l);
    const int layer = static_cast<int>(b), attention = layer + 2, mlp = layer + 7;
    const std::string p = "layers." + std::to_string(l);
    const double qkv = N * h * qkvOut, core = 2 * N * T * h, dense = N * h * h;
    const double fc1 = N * h * ff1, fc2 = N * ff * h;
    set(b + 1, p + ".input_layernorm", normType, 2, layer, normParams, 0);
    set(b + 2, p + ".attention", "SelfAttention", 2, layer, qkvParams + qkNormParams + denseParams,
        qkv + core + dense);
    set(b + 3, p + ".attention.query_key_value", "Linear", 3, attention, qkvParams, qkv);
    set(b + 4, p + ".attention.core", "CausalAttention", 3, attention, qkNormParams, core);
    set(b + 5, p + ".attention.dense", "Linear", 3, attention, denseParams, dense);
    set(b + 6, p + ".post_attention_layernorm", normType, 2, layer, normParams, 0);
    double mlpMacs = fc1 + fc2, blockParams = static_cast<double>(layout.numel);
    if (config_.moe.isMoeLayer(static_cast<int>(l))) {
      // A MoE layer's modules in the dense MLP's slots: experts, router, DeepSpeed's residual MLP.
      const gpt::BlockLayout moe = gpt::blockLayout(config_, true);
      const double E = config_.moe.numExperts, router = E * h;
      const double experts = E * static_cast<double>(moe.expertStride);
      blockParams = static_cast<double>(moe.numel) + experts;
      mlpMacs = N * config_.mlpMacsPerToken(static_cast<int>(l));
      const double residual =
          mlpMacs - N * router -
          N * config_.moe.topK * h * (config_.expertFfnInputSize() + config_.expertFfnSize());
      // Everything after post_attention_layernorm: the router comes first.
      const double mlpParams = blockParams - static_cast<double>(moe.routerw);
      set(b + 7, p + ".mlp", "MoE", 2, layer, mlpParams, mlpMacs);
      // The layer's forward time is timed as one: it shows under the experts.
      set(b + 8, p + ".mlp.experts", "Experts", 3, mlp, experts, mlpMacs - N * router - residual);
      set(b + 9, p + ".mlp.router", "Linear", 3, mlp, router, N * router);
      set(b + 10, p + ".mlp.mlp", "MLP", 3, mlp, mlpParams - router - experts, residual);
    } else {
      set(b + 7, p + ".mlp", "MLP", 2, layer, fc1Params + fc2Params, fc1 + fc2);
      set(b + 8, p + ".mlp.dense_h_to_4h", "Linear", 3, mlp, fc1Params, fc1);
      set(b + 9, p + ".mlp.activation", activationModuleType(config_.activation), 3, mlp, 0, 0);
      set(b + 10, p + ".mlp.dense_4h_to_h", "Linear", 3, mlp, fc2Params, fc2);
    }
    set(b, p, "TransformerLayer", 1, 0, blockParams, qkv + core + dense + mlpMacs);
    totalParams += blockParams;
    totalMacs += qkv + core + dense + mlpMacs;
  }
  const size_t finalModule = blockModule(config_.numLayers);
  set(finalModule, "final_layer_norm", normType, 1, 0, normParams, 0);
  const double headMacs = N * h * vocab;
  set(finalModule + 1, "embed_out", "Linear", 1, 0, config_.weightTying ? 0 : vocab * h, headMacs);
  totalParams += normParams + (config_.weightTying ? 0 : vocab * h);
  totalMacs += headMacs;
  set(kRootModule, "", "GPT", 0, -1, totalParams, totalMacs);
  return m;
}

}  // namespace ds::runtime
