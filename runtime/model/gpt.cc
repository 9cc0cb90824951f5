// The GPT model's parameter table, initialisation and the layer-by-layer pass through
// LayerAccess (embedding, blocks in gpt_block.cc, head with the fused cross-entropy).
#include "runtime/model/gpt.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "common/error.h"
#include "common/fnv1a.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/philox.h"
#include "kernels/cpu/transformer_kernels.h"
#include "runtime/model/gpt_block.h"

namespace ds::runtime {

using gpt::BlockActivations;
using gpt::BlockLayout;
using gpt::sized;

// Everything a pass keeps or reuses, sized on first use and kept for the next micro-batch.
class GptActivations {
 public:
  GptActivations(const GptConfig& c, const kernels::TransformerKernels& k) : runner(c, k) {}
  gpt::BlockRunner runner;
  std::vector<BlockActivations> blocks;  // one per block; only .input when checkpointing
  BlockActivations recompute;            // checkpointing: the block being recomputed
  gpt::BlockWorkspace work;
  std::vector<float> embedded;              // [N, h] embedding output = block 0's input
  std::vector<float> last;                  // [N, h] the last block's output
  std::vector<float> finalNorm, fa, fb;     // head: [N, h], [N], [N]
  std::vector<float> logits;                // [chunk, vocab]
  std::vector<float> dx, dy;                // [N, h] gradient flowing down
  std::vector<float> tiedGrad;              // tied: the head's word-embedding gradient
  std::vector<float> sinusoid;              // [positions, h] fixed position table
  std::vector<float> discard;               // a recomputed block's output (already known)
  size_t peakBytes = 0;
};

namespace {

// Rows of logits computed at once: bounds the [rows, vocab] buffer for large vocabularies.
constexpr size_t kLogitRows = 1024;

// The profiler's module table: root, embed, kTimers per block, final norm, output.
constexpr size_t kRootModule = 0, kEmbedModule = 1, kFirstBlockModule = 2;
size_t blockModule(size_t layer) { return kFirstBlockModule + layer * gpt::BlockRunner::kTimers; }

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

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

}  // namespace

Gpt::Gpt(GptConfig config) : config_(std::move(config)) {
  config_.validate();
  const size_t h = config_.hiddenSize, vocab = config_.paddedVocabSize();
  auto add = [&](std::string name, std::vector<int64_t> shape, bool decay, int layer) {
    ParamSpec s;
    s.name = std::move(name);
    s.shape = std::move(shape);
    s.weightDecay = decay;
    s.layer = layer;
    s.numel = 1;
    for (int64_t d : s.shape) s.numel *= static_cast<size_t>(d);
    s.offset = specs_.empty() ? 0 : specs_.back().offset + specs_.back().numel;
    specs_.push_back(std::move(s));
  };
  const auto H = static_cast<int64_t>(h);
  add("embed.word_embeddings.weight", {static_cast<int64_t>(vocab), H}, true, 0);
  if (config_.posEmb == PositionEmbedding::Learned)
    add("embed.position_embeddings.weight", {config_.maxPositionEmbeddings, H}, true, 0);
  const bool normBias = config_.normHasBias(), attnBias = config_.biasInAttnLinear,
             mlpBias = config_.biasInMlp;
  const auto ff = static_cast<int64_t>(config_.ffnSize()),
             ff1 = static_cast<int64_t>(config_.ffnInputSize()),
             qkv = static_cast<int64_t>(config_.qkvSize()),
             normWeights = static_cast<int64_t>(config_.normWeightSize());
  for (int l = 0; l < config_.numLayers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", {normWeights}, false, l + 1);
    if (normBias) add(p + "input_layernorm.bias", {H}, false, l + 1);
    if (config_.qkNorm) {  // NeoX's norm([heads, head size]): ScaleNorm's is one gain
      const auto heads = static_cast<int64_t>(config_.numAttentionHeads),
                 d = static_cast<int64_t>(config_.headDim());
      const std::vector<int64_t> shape =
          config_.norm == NormKind::ScaleNorm ? std::vector<int64_t>{1} : std::vector{heads, d};
      add(p + "attention.qk_layernorm.weight", shape, false, l + 1);
      if (config_.norm == NormKind::LayerNorm)
        add(p + "attention.qk_layernorm.bias", {heads, d}, false, l + 1);
    }
    add(p + "attention.query_key_value.weight", {qkv, H}, true, l + 1);
    if (attnBias) add(p + "attention.query_key_value.bias", {qkv}, false, l + 1);
    add(p + "attention.dense.weight", {H, H}, true, l + 1);
    if (attnBias) add(p + "attention.dense.bias", {H}, false, l + 1);
    add(p + "post_attention_layernorm.weight", {normWeights}, false, l + 1);
    if (normBias) add(p + "post_attention_layernorm.bias", {H}, false, l + 1);
    add(p + "mlp.dense_h_to_4h.weight", {ff1, H}, true, l + 1);
    if (mlpBias) add(p + "mlp.dense_h_to_4h.bias", {ff1}, false, l + 1);
    add(p + "mlp.dense_4h_to_h.weight", {H, ff}, true, l + 1);
    if (mlpBias) add(p + "mlp.dense_4h_to_h.bias", {H}, false, l + 1);
  }
  const int head = config_.numLayers + 1;
  add("final_layer_norm.weight", {normWeights}, false, head);
  if (normBias) add("final_layer_norm.bias", {H}, false, head);
  if (!config_.weightTying) add("embed_out.weight", {static_cast<int64_t>(vocab), H}, true, head);

  acts_ = std::make_unique<GptActivations>(config_, kernels::transformerKernels());
  const size_t positions = static_cast<size_t>(maxPositions());
  if (config_.posEmb == PositionEmbedding::Rotary) acts_->runner.prepareRotary(positions);
  if (config_.posEmb == PositionEmbedding::Sinusoidal) {
    // NeoX: inv_freq = 10000^(-2i / h); [sin(t * f) | cos(t * f)]
    acts_->sinusoid.assign(positions * h, 0.0f);
    for (size_t t = 0; t < positions; ++t)
      for (size_t i = 0; i < h / 2; ++i) {
        const float f = static_cast<float>(
            1.0 / std::pow(10000.0, static_cast<double>(2 * i) / static_cast<double>(h)));
        const float angle = static_cast<float>(t) * f;
        acts_->sinusoid[t * h + i] = std::sin(angle);
        acts_->sinusoid[t * h + h / 2 + i] = std::cos(angle);
      }
  }
  acts_->blocks.resize(config_.numLayers);
}

Gpt::~Gpt() = default;

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
  // PyTorch's fans of a [out, in] weight (an embedding's [vocab, h] alike).
  const double fanOut = static_cast<double>(s.shape[0]),
               fanIn = static_cast<double>(s.numel) / fanOut;
  const float std = initStd(method, config_, fanIn, fanOut);
  // Philox4x32-10 with key = seed and counter = (block, stream = the name's hash): each element
  // depends on the seed, the tensor's name and its index only, so adding a tensor changes no
  // other, and a rank can draw any range of a tensor alone (docs/gpt-trainer.md has the mapping).
  const uint64_t stream = fnv1a64(s.name.data(), s.name.size());
  if (method == InitMethod::XavierUniform) {
    // U(-a, a): element e is the top 24 bits of word e % 4 of block e / 4.
    const double bound = std::sqrt(3.0) * std;
    kernels::PhiloxWords words{};
    for (size_t e = begin; e < end; ++e) {
      if (e == begin || e % 4 == 0) words = kernels::philoxBlock(seed, stream, e / 4);
      const double u = static_cast<double>(words[e % 4] >> 8) * 0x1.0p-24;  // [0, 1)
      p[e - begin] = static_cast<float>((2.0 * u - 1.0) * bound);
    }
    return;
  }
  kernels::transformerKernels().normalFromPhilox(p, end - begin, seed, stream, begin, std);
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

Gpt::Macs Gpt::forwardMacsPerSample(size_t seq) const {
  const double T = static_cast<double>(seq), h = config_.hiddenSize, L = config_.numLayers;
  Macs m;
  m.attentionProjections = L * T * (h * config_.qkvSize() + h * h);
  // Q K^T and P V over the whole T x T matrix: the causal half and the keys outside a sliding
  // window are computed, then masked, not skipped.
  m.attentionScores = L * 2.0 * T * T * h;
  m.mlp = L * T * h * (config_.ffnInputSize() + config_.ffnSize());
  m.head = T * h * config_.paddedVocabSize();
  return m;
}

float Gpt::run(const Batch& batch, LayerAccess& access, float gradScale, Pass pass,
               std::vector<float>* lastLogits) {
  size_t seq = 0;
  checkBatch(batch, seq);
  const bool train = pass == Pass::Train;
  if (pass != Pass::Logits && batch.targetIds.size() != batch.inputIds.size())
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

  GptActivations& A = *acts_;
  const kernels::TransformerKernels& k = kernels::transformerKernels();
  const size_t h = config_.hiddenSize, vocab = config_.paddedVocabSize(), L = config_.numLayers;
  const gpt::BlockShape shape{batch.size, seq, batch.size * seq};
  const size_t N = shape.rows;
  const bool checkpointing = train && config_.checkpointActivations;
  gpt::DropoutKey keys{&batch.sampleIds, 0};
  auto dropoutFor = [&](size_t layer) -> const gpt::DropoutKey* {
    if (!train || (config_.attentionDropout <= 0 && config_.hiddenDropout <= 0)) return nullptr;
    keys.layer = layer;
    return &keys;
  };
  const bool learnedPositions = config_.posEmb == PositionEmbedding::Learned;
  const float* fixedPositions =
      config_.posEmb == PositionEmbedding::Sinusoidal ? A.sinusoid.data() : nullptr;

  double* times = profiling_ && pass == Pass::Train ? moduleSeconds_.data() : nullptr;
  const Clock::time_point forwardStart = Clock::now();
  // Forward: embedding.
  {
    const float* p = access.acquireParameters(0);
    float* x = sized(L > 0 ? A.blocks[0].input : A.last, N * h);
    k.embeddingForward(x, batch.inputIds.data(), p,
                       learnedPositions ? p + vocab * h : fixedPositions, N, seq, h);
    if (const auto* key = dropoutFor(0); key && config_.hiddenDropout > 0)
      gpt::applyDropout(x, batch.size, seq * h, static_cast<float>(config_.hiddenDropout), *key, 0);
    access.releaseParameters(0);
    if (times) times[kEmbedModule] += since(forwardStart);
  }
  // Blocks: each writes the next one's input (the last writes A.last).
  for (size_t l = 0; l < L; ++l) {
    const float* p = access.acquireParameters(static_cast<int>(l + 1));
    BlockActivations& kept = A.blocks[l];
    BlockActivations& a = checkpointing ? A.recompute : kept;
    if (checkpointing) a.input.assign(kept.input.begin(), kept.input.end());
    float* out = sized(l + 1 < L ? A.blocks[l + 1].input : A.last, N * h);
    const Clock::time_point blockStart = Clock::now();
    A.runner.forward(p, a, A.work, shape, out, dropoutFor(l + 1), times ? times + blockModule(l) : nullptr);
    if (times) times[blockModule(l) + gpt::BlockRunner::kLayer] += since(blockStart);
    access.releaseParameters(static_cast<int>(l + 1));
  }
  size_t bytes = 0;
  for (const auto& b : A.blocks) bytes += b.bytes();
  bytes += A.recompute.bytes() + A.last.capacity() * sizeof(float);
  A.peakBytes = std::max(A.peakBytes, bytes);

  // Head: final norm, logits chunk by chunk, cross-entropy and (training) its backward at once.
  const int head = static_cast<int>(L + 1);
  const float* hp = access.acquireParameters(head);
  const size_t normWeights = static_cast<size_t>(config_.normWeightSize());
  const size_t headNormNumel = normWeights + (config_.normHasBias() ? h : 0);
  const Clock::time_point headStart = Clock::now();
  const float* fw = hp;
  const float* fbias = config_.normHasBias() ? hp + normWeights : nullptr;
  float* xf = sized(A.finalNorm, N * h);
  A.runner.norm(A.last.data(), fw, fbias, xf, sized(A.fa, N), sized(A.fb, N), N);
  const size_t finalModule = blockModule(L), outputModule = finalModule + 1;
  if (times) times[finalModule] += since(headStart);
  double outputSeconds = 0.0;  // the head's forward parts only (it interleaves its backward)
  float* hg = train ? access.layerGradients(head) : nullptr;  // opens the backward pass
  const float* outW = config_.weightTying ? access.acquireParameters(0) : hp + headNormNumel;
  float* outG = nullptr;
  if (train) {
    outG = config_.weightTying ? sized(A.tiedGrad, vocab * h) : hg + headNormNumel;
    if (config_.weightTying) std::fill(A.tiedGrad.begin(), A.tiedGrad.end(), 0.0f);
  }
  if (pass == Pass::Logits) {
    lastLogits->assign(vocab, 0.0f);
    kernels::matmul(false, true, 1, vocab, h, 1.0f, xf + (N - 1) * h, h, outW, h, 0.0f,
                    lastLogits->data(), vocab);
    if (config_.weightTying) access.releaseParameters(0);
    access.releaseParameters(head);
    return 0.0f;
  }
  double lossSum = 0.0;
  float* dxf = train ? sized(A.dx, N * h) : nullptr;
  // NeoX's loss: sum(loss * mask) / mask.sum() over this micro-batch's tokens; the engine then
  // averages micro-batches and ranks as DeepSpeed does (each micro-batch weighs the same, however
  // many tokens it counts). With nothing masked, counted == N: the plain mean, bitwise. A batch
  // with every target masked gives 0 loss and no gradient where NeoX's 0 / 0 gives NaN.
  const size_t divisor = std::max<size_t>(counted, 1);
  const float rowScale = gradScale / static_cast<float>(divisor);
  for (size_t r0 = 0; r0 < N; r0 += kLogitRows) {
    const size_t rows = std::min(kLogitRows, N - r0);
    float* z = sized(A.logits, rows * vocab);
    const Clock::time_point chunkStart = Clock::now();
    kernels::matmul(false, true, rows, vocab, h, 1.0f, xf + r0 * h, h, outW, h, 0.0f, z, vocab);
    lossSum += k.crossEntropy(z, batch.targetIds.data() + r0, rows, vocab, rowScale);
    outputSeconds += since(chunkStart);
    if (!train) continue;
    kernels::matmul(false, false, rows, h, vocab, 1.0f, z, vocab, outW, h, 0.0f, dxf + r0 * h, h);
    kernels::matmul(true, false, vocab, h, rows, 1.0f, z, vocab, xf + r0 * h, h, 1.0f, outG, h);
  }
  const float loss = static_cast<float>(lossSum / static_cast<double>(divisor));
  if (times) {
    times[outputModule] += outputSeconds;
    double forward = times[kEmbedModule] + times[finalModule] + times[outputModule];
    for (size_t l = 0; l < L; ++l) forward += times[blockModule(l) + gpt::BlockRunner::kLayer];
    times[kRootModule] = forward;  // the sum so far over the profiled passes
  }
  if (config_.weightTying) access.releaseParameters(0);
  if (!train) {
    access.releaseParameters(head);
    return loss;
  }
  float* dx = sized(A.dy, N * h);
  A.runner.normBackward(dxf, A.last.data(), fw, A.fa.data(), A.fb.data(), dx, hg,
                        fbias ? hg + normWeights : nullptr, N);
  access.gradientsDone(head);

  // Backward through the blocks; dx holds d(loss)/d(block output), dIn goes to A.dx.
  for (size_t l = L; l-- > 0;) {
    const int layer = static_cast<int>(l + 1);
    const float* p = access.acquireParameters(layer);
    BlockActivations* a = &A.blocks[l];
    if (checkpointing) {  // recompute this block's forward from its kept input
      A.recompute.input.assign(a->input.begin(), a->input.end());
      A.runner.forward(p, A.recompute, A.work, shape, sized(A.discard, N * h), dropoutFor(layer));
      a = &A.recompute;
    }
    float* g = access.layerGradients(layer);
    float* dIn = sized(A.dx, N * h);
    A.runner.backward(p, g, *a, A.work, shape, dx, dIn, dropoutFor(layer));
    access.gradientsDone(layer);
    std::swap(A.dx, A.dy);
    dx = A.dy.data();
  }
  // Embedding: scatter the gradient into the used rows (and positions); no parameters needed.
  float* g0 = access.layerGradients(0);
  if (const auto* key = dropoutFor(0); key && config_.hiddenDropout > 0)
    gpt::applyDropout(dx, batch.size, seq * h, static_cast<float>(config_.hiddenDropout), *key, 0);
  k.embeddingBackward(g0, learnedPositions ? g0 + vocab * h : nullptr, batch.inputIds.data(), dx,
                      N, seq, h);
  if (config_.weightTying) k.add(g0, A.tiedGrad.data(), vocab * h);
  access.gradientsDone(0);
  return loss;
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
    set(b + 7, p + ".mlp", "MLP", 2, layer, fc1Params + fc2Params, fc1 + fc2);
    set(b + 8, p + ".mlp.dense_h_to_4h", "Linear", 3, mlp, fc1Params, fc1);
    set(b + 9, p + ".mlp.activation", activationModuleType(config_.activation), 3, mlp, 0, 0);
    set(b + 10, p + ".mlp.dense_4h_to_h", "Linear", 3, mlp, fc2Params, fc2);
    set(b, p, "TransformerLayer", 1, 0, static_cast<double>(layout.numel), qkv + core + dense + fc1 + fc2);
    totalParams += static_cast<double>(layout.numel);
    totalMacs += qkv + core + dense + fc1 + fc2;
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
