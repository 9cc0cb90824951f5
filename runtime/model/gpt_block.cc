// One transformer block, forward and backward (see gpt_block.h). Shapes: N = samples * seq rows,
// h hidden, H query heads of d = h / H, KV key/value heads (grouped-query attention: query head i
// reads key/value head i / (H / KV)), T = seq, Q = h + 2 KV d query_key_value outputs, ff and ff1
// the MLP widths of GptConfig. Weights are [out, in] (PyTorch's Linear), so y = x W^T + b.
//   sequential residual: mid = x + drop(attn(norm1(x))); out = mid + drop(mlp(norm2(mid)))
//   gpt-j residual:      out = x + drop(attn(norm1(x))) + drop(mlp(norm2(x)))
//   gpt-j, tied norms:   out = x + drop(attn(norm1(x))) + drop(mlp(norm1(x)))  (norm2 unused,
//                        as in NeoX, where post_attention_layernorm stays but gets no gradient)
// Attention: q, k = qkNorm(q), qkNorm(k) if use-qk-layernorm; rotary; causal softmax over the
// sliding window (query i sees keys i - W..i) or the whole prefix.
#include "runtime/model/gpt_block.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "common/error.h"
#include "kernels/cpu/kernel_timers.h"
#include "kernels/cpu/splitmix_impl.h"
#include "runtime/model/norm_backward.h"
#include "runtime/model/parallel_loops.h"
#include "runtime/model/row_kernels.h"
#include "runtime/model/sequence_parallel.h"
#include "runtime/parallel/tensor_slicing.h"

namespace ds::runtime::gpt {

using kernels::KernelFamily;
using kernels::KernelTimer;

void product(kernels::Accelerator& acc, bool transA, bool transB, size_t m, size_t n, size_t k,
             float alpha, const float* a, size_t lda, const float* b, size_t ldb, float beta,
             float* c, size_t ldc) {
  KernelTimer timer(KernelFamily::MatrixProducts);
  kernels::gemmF32(acc, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

kernels::Unit unitOf(Activation a) {
  switch (a) {
    case Activation::Relu:
    case Activation::Reglu:
      return kernels::Unit::Relu;
    case Activation::Silu:
    case Activation::Swiglu:
      return kernels::Unit::Silu;
    case Activation::Glu:
      return kernels::Unit::Sigmoid;
    case Activation::Gelu:
    case Activation::Geglu:
      return kernels::Unit::Gelu;
    case Activation::Softsign:
      return kernels::Unit::Softsign;
    case Activation::Mish:
      return kernels::Unit::Mish;
    case Activation::Bilinear:
      break;
  }
  return kernels::Unit::Identity;
}

namespace {

// The dropout sites of a block and of the embedding.
constexpr uint64_t kSiteAttentionProbs = 1, kSiteAttentionOut = 2, kSiteMlpOut = 3;

}  // namespace

BlockSlice blockSlice(const GptConfig& c, int rank, int size, Communicator* model,
                      Communicator* experts) {
  BlockSlice s;
  s.rank = rank;
  s.size = size;
  s.model = size > 1 ? model : nullptr;
  if (size > 1 && (!model || model->size() != size || model->rank() != rank))
    throw Error("tensor slicing: model rank " + std::to_string(rank) + " of " +
                std::to_string(size) + " needs the model-parallel group of that size and rank");
  const HeadSlice heads = attentionHeadSlice(c.numAttentionHeads, c.kvHeads(), rank, size);
  s.firstHead = heads.firstHead;
  s.heads = heads.heads;
  s.firstKvHead = heads.firstKvHead;
  s.kvHeads = heads.kvHeads;
  const SliceRange ffn = evenChunk(static_cast<size_t>(c.ffnSize()), rank, size,
                                   "the MLP's width (intermediate-size, or 4 x hidden-size)");
  s.firstFfn = ffn.begin;
  s.ffn = ffn.count;
  // The experts: split over the model ranks (as NeoX's dropless MoE), each model rank's share
  // over the expert-parallel group (DeepSpeed-MoE).
  if (!c.moe.enabled()) return s;
  const SliceRange overModel = evenChunk(static_cast<size_t>(c.moe.numExperts), rank, size,
                                         "moe-num-experts (over the model-parallel ranks)");
  const int ep = experts ? experts->size() : 1, epRank = experts ? experts->rank() : 0;
  const SliceRange held =
      evenChunk(overModel.count, epRank, ep, "moe-num-experts (over the expert-parallel ranks)");
  s.firstExpert = overModel.begin + held.begin;
  s.experts = held.count;
  return s;
}

MoeSplit moeSplit(const GptConfig& c, const BlockSlice& slice) {
  if (slice.size == 1) return {};
  const size_t perRank = static_cast<size_t>(c.moe.numExperts / slice.size);
  return {static_cast<size_t>(slice.rank) * perRank, perRank, slice.model, slice.ffn};
}

BlockLayout blockLayout(const GptConfig& c, bool moe) {
  return blockLayout(c, blockSlice(c, 0, 1, nullptr), moe);
}

BlockLayout blockLayout(const GptConfig& c, const BlockSlice& slice, bool moe) {
  // A gated MLP's dense_h_to_4h holds the rank's chunk of each half ([x | gate]).
  const size_t h = c.hiddenSize, ff = slice.ffn, ff1 = c.gated() ? 2 * ff : ff,
               d = c.headDim(), qkv = (slice.heads + 2 * slice.kvHeads) * d,
               hq = slice.heads * d;
  const size_t normWeights = c.normWeightSize();
  const bool normBias = c.normHasBias(), attnBias = c.biasInAttnLinear, mlpBias = c.biasInMlp;
  BlockLayout l{};
  size_t o = 0;
  auto take = [&](size_t n) {
    const size_t at = o;
    o += n;
    return at;
  };
  auto maybe = [&](bool present, size_t n) { return present ? take(n) : BlockLayout::kNone; };
  l.ln1w = take(normWeights);
  l.ln1b = maybe(normBias, h);
  // NeoX registers attention.qk_layernorm before attention.query_key_value.
  l.qknw = maybe(c.qkNorm, normWeights);
  l.qknb = maybe(c.qkNorm && c.norm == NormKind::LayerNorm, h);
  l.qkvw = take(qkv * h);
  l.qkvb = maybe(attnBias, qkv);
  l.densew = take(h * hq);
  l.denseb = maybe(attnBias, h);
  l.ln2w = take(normWeights);
  l.ln2b = maybe(normBias, h);
  const bool denseMlp = !moe || (c.moe.kind == MoeKind::DeepSpeed && c.moe.useResidual);
  if (moe) {  // DeepSpeed's module order: gate, experts, residual MLP, coefficient
    const size_t xff = c.expertFfnSize(), xff1 = c.expertFfnInputSize();
    const bool expertBias = c.moe.kind == MoeKind::DeepSpeed && mlpBias;  // NeoX's have none
    l.routerw = take(static_cast<size_t>(c.moe.numExperts) * h);
    l.expert = {0, expertBias ? xff1 * h : BlockLayout::kNone, xff1 * h + (expertBias ? xff1 : 0),
                BlockLayout::kNone};
    l.expertStride = xff1 * h + xff * h + (expertBias ? xff1 + h : 0);
    if (expertBias) l.expert.fc2b = l.expert.fc2w + h * xff;
    l.experts = slice.experts;
    l.expertsNumel = l.expertStride * slice.experts;
  }
  l.fc1w = maybe(denseMlp, ff1 * h);
  l.fc1b = maybe(denseMlp && mlpBias, ff1);
  l.fc2w = maybe(denseMlp, h * ff);
  l.fc2b = maybe(denseMlp && mlpBias, h);
  if (moe && denseMlp) {
    l.coefw = take(2 * h);
    l.coefb = take(2);
  }
  l.numel = o;
  return l;
}

namespace {

// The hash base of a sample's mask at one site.
uint64_t dropoutBase(const DropoutKey& key, size_t sample, uint64_t site) {
  return splitmixFinalize(splitmixFinalize((*key.sampleIds)[sample] ^ 0x9e3779b97f4a7c15ULL) ^
                          splitmixFinalize((key.layer << 8) | site));
}

// p as the dropout kernel's threshold and scale (kernels::TransformerKernels::dropout).
struct DropoutMask {
  uint32_t threshold;  // keep when the top 24 bits of the hash are at or above p * 2^24
  float keepScale;
  explicit DropoutMask(float p)
      : threshold(static_cast<uint32_t>(std::ldexp(static_cast<double>(p), 24))),
        keepScale(1.0f / (1.0f - p)) {}
  void apply(const kernels::TransformerKernels& k, const float* in, float* out, size_t n,
             uint64_t base, uint64_t first) const {
    k.dropout(in, out, n, base, first, threshold, keepScale);
  }
};

// Attention dropout as the accelerator takes it (kernels::AttentionDropout): the mask's threshold
// and scale, each sample's base, and the rank's heads keyed from its first global head, so that
// every model-parallel layout draws the masks of the whole model. get() is null without dropout.
class AttentionDropoutMasks {
 public:
  AttentionDropoutMasks(double p, size_t firstHead, const kernels::AttentionShape& shape,
                        const DropoutKey* key) {
    if (!key || p <= 0.0) return;
    const DropoutMask mask(static_cast<float>(p));
    for (size_t b = 0; b < shape.samples; ++b)
      bases_.push_back(dropoutBase(*key, b, kSiteAttentionProbs));
    drop_ = {mask.threshold, mask.keepScale, bases_.data(), firstHead * shape.seq * shape.seq};
  }
  const kernels::AttentionDropout* get() const { return bases_.empty() ? nullptr : &drop_; }

 private:
  std::vector<uint64_t> bases_;
  kernels::AttentionDropout drop_{};
};

}  // namespace

void applyDropoutRows(float* x, const BlockShape& s, size_t width, float p, const DropoutKey& key,
                      uint64_t site, kernels::Accelerator& acc) {
  const DropoutMask mask(p);
  const kernels::TransformerKernels& k = acc.transformerKernels();
  const size_t end = s.firstRow + s.local;
  for (size_t row = s.firstRow; row < end;) {  // sample by sample: each has its own mask
    const size_t sample = row / s.seq, stop = std::min(end, (sample + 1) * s.seq);
    float* v = x + (row - s.firstRow) * width;
    mask.apply(k, v, v, (stop - row) * width, dropoutBase(key, sample, site),
               (row - sample * s.seq + s.positionOffset) * width);
    row = stop;
  }
}

size_t BlockActivations::bytes() const {
  size_t n = 0;
  for (const auto* v : {&input, &ln1, &ln2, &stats1a, &stats1b, &stats2a, &stats2b, &qkRaw,
                        &qkStatsA, &qkStatsB, &qkv, &attnStats, &ctx, &ctxHeads, &mid, &fc1, &act})
    n += v->capacity();
  return n * sizeof(float) + moe.bytes();
}

BlockRunner::BlockRunner(const GptConfig& config, kernels::Accelerator& acc,
                         const BlockSlice& slice, bool moe)
    : c_(config),
      acc_(acc),
      k_(acc.transformerKernels()),
      slice_(slice),
      layout_(blockLayout(config, slice, moe)),
      moe_(config, acc, moeSplit(config, slice)) {
  if (c_.norm == NormKind::LayerNorm && !c_.normHasBias()) {
    zeroBias_.resize(acc_, static_cast<size_t>(c_.hiddenSize));
    unusedBiasGrad_.resize(acc_, zeroBias_.size());
  }
}

void BlockRunner::prepareRotary(size_t positions) {
  const size_t rot = static_cast<size_t>(c_.rotaryDim()), half = rot / 2;
  std::vector<float> cos(positions * half), sin(positions * half);
  for (size_t t = 0; t < positions; ++t)
    for (size_t i = 0; i < half; ++i) {
      // NeoX: inv_freq = base^(-2i / rot), angle = t * inv_freq (computed in fp32 there)
      const float invFreq = static_cast<float>(
          1.0 / std::pow(c_.rotaryEmbBase, static_cast<double>(2 * i) / static_cast<double>(rot)));
      const float angle = static_cast<float>(t) * invFreq;
      cos[t * half + i] = std::cos(angle);
      sin[t * half + i] = std::sin(angle);
    }
  kernels::assignHost(acc_, cos_, cos);
  kernels::assignHost(acc_, sin_, sin);
}

void BlockRunner::norm(const float* x, const float* w, const float* b, float* out, float* sa,
                       float* sb, size_t rows) const {
  KernelTimer timer(KernelFamily::Norms);
  const size_t h = c_.hiddenSize;
  parallelRows(
      acc_, rows, [&](size_t r0, size_t r1) {  // each row on its own: any split, the same bits
        const size_t n = r1 - r0, at = r0 * h;
        switch (c_.norm) {
          case NormKind::LayerNorm:
            k_.layerNormForward(out + at, sa + r0, sb + r0, x + at, w, b ? b : zeroBias_.data(), n,
                                h, static_cast<float>(c_.layernormEpsilon));
            break;
          case NormKind::RmsNorm:
            k_.rmsNormForward(out + at, sa + r0, x + at, w, n, h,
                              static_cast<float>(c_.rmsNormEpsilon));
            break;
          case NormKind::ScaleNorm:
            k_.scaleNormForward(out + at, sa + r0, x + at, w[0], n, h,
                                static_cast<float>(c_.scalenormEpsilon));
            break;
        }
      });
}

void BlockRunner::normBackward(const float* dout, const float* x, const float* w, const float* sa,
                               const float* sb, float* dx, float* dw, float* db,
                               size_t rows) const {
  KernelTimer timer(KernelFamily::Norms);
  const size_t h = c_.hiddenSize;
  switch (c_.norm) {
    case NormKind::LayerNorm:
      layerNormBackwardRows(acc_, k_, dx, dw, db ? db : unusedBiasGrad_.data(), dout, x, sa, sb, w,
                            rows, h, normPartials_);
      break;
    case NormKind::RmsNorm:
      rmsNormBackwardRows(acc_, k_, dx, dw, dout, x, sa, w, rows, h,
                          static_cast<float>(c_.rmsNormEpsilon), normPartials_);
      break;
    case NormKind::ScaleNorm:
      k_.scaleNormBackward(dx, dw, dout, x, sa, w[0], rows, h,
                           static_cast<float>(c_.scalenormEpsilon));
      break;
  }
}

namespace {

// The qk norm works on [2N, h]: queries (columns 0..h-1 of each [N, Q] qkv row) in rows 0..N-1,
// keys (columns h..2h-1) in rows N..2N-1. These move them out of qkv and back.
void gatherQueriesKeys(kernels::Accelerator& acc, float* qk, const float* qkv, size_t N, size_t h,
                       size_t Q) {
  constexpr auto kind = kernels::CopyKind::DeviceToDevice;
  const size_t f = sizeof(float);
  acc.copyRows(qk, h * f, qkv, Q * f, h * f, N, kind, acc.currentStream());
  acc.copyRows(qk + N * h, h * f, qkv + h, Q * f, h * f, N, kind, acc.currentStream());
}

void scatterQueriesKeys(kernels::Accelerator& acc, float* qkv, const float* qk, size_t N, size_t h,
                        size_t Q) {
  constexpr auto kind = kernels::CopyKind::DeviceToDevice;
  const size_t f = sizeof(float);
  acc.copyRows(qkv, Q * f, qk, h * f, h * f, N, kind, acc.currentStream());
  acc.copyRows(qkv + h, Q * f, qk + N * h, h * f, h * f, N, kind, acc.currentStream());
}

}  // namespace

// NeoX builds the query/key norm as norm([heads, head size]) and applies it to q and k of shape
// [.., heads, head size]: torch's LayerNorm then normalises over both trailing dimensions (the
// whole query of a token) with a weight and bias per element; NeoX's RMSNorm and ScaleNorm reduce
// over the last dimension only (each head apart), RMSNorm with a weight per head and element,
// ScaleNorm with one gain. Queries are rows 0..N-1 of the [2N, h] buffers, keys rows N..2N-1.
void BlockRunner::qkNormForward(const float* w, const float* b, float* qkv, BlockActivations& a,
                                BlockWorkspace& ws, size_t N) const {
  const size_t h = c_.hiddenSize, Q = c_.qkvSize(), H = c_.numAttentionHeads, d = c_.headDim();
  float* raw = sized(acc_, a.qkRaw, 2 * N * h);
  float* out = sized(acc_, ws.qkA, 2 * N * h);
  gatherQueriesKeys(acc_, raw, qkv, N, h, Q);
  const bool perToken = c_.norm == NormKind::LayerNorm;
  const size_t stats = perToken ? 2 * N : 2 * N * H;
  float* sa = sized(acc_, a.qkStatsA, stats);
  float* sb = sized(acc_, a.qkStatsB, stats);
  switch (c_.norm) {
    case NormKind::LayerNorm:
      k_.layerNormForward(out, sa, sb, raw, w, b, 2 * N, h,
                          static_cast<float>(c_.layernormEpsilon));
      break;
    case NormKind::RmsNorm:
      parallelRows(acc_, 2 * N, [&](size_t r0, size_t r1) {
        for (size_t i = r0 * H; i < r1 * H; ++i)
          k_.rmsNormForward(out + i * d, sa + i, raw + i * d, w + (i % H) * d, 1, d,
                            static_cast<float>(c_.rmsNormEpsilon));
      });
      break;
    case NormKind::ScaleNorm:
      k_.scaleNormForward(out, sa, raw, w[0], 2 * N * H, d,
                          static_cast<float>(c_.scalenormEpsilon));
      break;
  }
  scatterQueriesKeys(acc_, qkv, out, N, h, Q);
}

void BlockRunner::qkNormBackward(const float* w, float* dw, float* db, float* dqkv,
                                 const BlockActivations& a, BlockWorkspace& ws, size_t N) const {
  const size_t h = c_.hiddenSize, Q = c_.qkvSize(), H = c_.numAttentionHeads, d = c_.headDim();
  float* dn = sized(acc_, ws.qkA, 2 * N * h);
  float* draw = sized(acc_, ws.qkB, 2 * N * h);
  gatherQueriesKeys(acc_, dn, dqkv, N, h, Q);
  const float* raw = a.qkRaw.data();
  const float* sa = a.qkStatsA.data();
  switch (c_.norm) {
    case NormKind::LayerNorm:
      layerNormBackwardRows(acc_, k_, draw, dw, db, dn, raw, sa, a.qkStatsB.data(), w, 2 * N, h,
                            normPartials_);
      break;
    case NormKind::RmsNorm:  // one task per head: each adds into its own slice of dw
      parallelFor(acc_, H, [&](size_t j) {
        for (size_t i = j; i < 2 * N * H; i += H)
          k_.rmsNormBackward(draw + i * d, dw + j * d, dn + i * d, raw + i * d, sa + i, w + j * d,
                             1, d, static_cast<float>(c_.rmsNormEpsilon));
      });
      break;
    case NormKind::ScaleNorm:
      k_.scaleNormBackward(draw, dw, dn, raw, sa, w[0], 2 * N * H, d,
                           static_cast<float>(c_.scalenormEpsilon));
      break;
  }
  scatterQueriesKeys(acc_, dqkv, draw, N, h, Q);
}

namespace {

// A block tensor's first element from its layout offset; null where the config leaves it out.
template <class T>
T* tensorAt(T* base, size_t offset) {
  return offset == BlockLayout::kNone ? nullptr : base + offset;
}

template <class Fn>
void elementWise(Fn fn) {
  KernelTimer timer(KernelFamily::ElementWise);
  fn();
}

}  // namespace

// The profiler's forward latencies: a lap's time since the previous lap goes to its timer; a
// part's total (attention, MLP) runs from the lap that opened it to the last lap so far.
class BlockRunner::Laps {
 public:
  using Clock = std::chrono::steady_clock;
  explicit Laps(double* times) : times_(times), last_(Clock::now()) {}
  Clock::time_point lap(Timer timer) {
    const Clock::time_point now = Clock::now();
    if (times_) times_[timer] += std::chrono::duration<double>(now - last_).count();
    last_ = now;
    return now;
  }
  // The part's last lap, then its total since `partStart`.
  void endPart(Timer lastLap, Timer part, Clock::time_point partStart) {
    lap(lastLap);
    if (times_) times_[part] += std::chrono::duration<double>(last_ - partStart).count();
  }

 private:
  double* times_;
  Clock::time_point last_;
};

BlockRunner::AttentionLayout BlockRunner::attentionLayout(const BlockShape& s) const {
  const size_t d = c_.headDim(), H = slice_.heads, KV = slice_.kvHeads;
  const size_t u = s.ulysses ? static_cast<size_t>(s.ulysses->size()) : 1;
  const size_t rank = s.ulysses ? static_cast<size_t>(s.ulysses->rank()) : 0;
  const size_t T = s.ulysses ? s.fullSeq : s.seq;
  AttentionLayout at{{s.samples, T, H / u, KV / u, d, c_.attentionWindow(T)},
                     slice_.firstHead + rank * (H / u),
                     {{0, H * d}, {H * d, KV * d}, {(H + KV) * d, KV * d}},
                     {{0, H * d}}};
  return at;
}

void BlockRunner::rotate(float* qkv, const kernels::AttentionShape& shape, bool inverse) const {
  const size_t rot = c_.rotaryDim();
  if (!rot) return;
  const size_t rows = shape.samples * shape.seq, d = shape.headDim, Q = shape.qkvStride();
  k_.rotary(qkv, rows, shape.seq, shape.heads, d, Q, rot, cos_.data(), sin_.data(), inverse);
  k_.rotary(qkv + shape.heads * d, rows, shape.seq, shape.kvHeads, d, Q, rot, cos_.data(),
            sin_.data(), inverse);
}

void BlockRunner::forward(BlockTensors<const float> params, BlockActivations& a, BlockWorkspace& w,
                          const BlockShape& s, float* out, const DropoutKey* dropout,
                          double* times) {
  Laps laps(times);
  attentionForward(params.block, a, w, s, dropout, laps);
  mlpForward(params, a, w, s, dropout, laps);
  const size_t n = s.local, h = c_.hiddenSize;
  const float* attnOut = w.attnOut.data();
  const float* mlpOut = w.mlpOut.data();
  // mid + mlpOut, or (x + attnOut) + mlpOut for gpt-j.
  KernelTimer residual(KernelFamily::ElementWise);
  if (c_.gptjResidual) {
    sumRows(acc_, k_, out, a.input.data(), attnOut, n, h);
    addRows(acc_, k_, out, mlpOut, n, h);
  } else {
    sumRows(acc_, k_, out, a.mid.data(), mlpOut, n, h);
  }
}

void BlockRunner::attentionForward(const float* params, BlockActivations& a, BlockWorkspace& w,
                                   const BlockShape& s, const DropoutKey* dropout, Laps& laps) {
  const BlockLayout& L = layout_;
  // The rank's heads (all of them at model size 1, where hq = h).
  const size_t N = s.rows, h = c_.hiddenSize, hq = slice_.heads * c_.headDim(),
               Q = hq + 2 * slice_.kvHeads * c_.headDim();
  auto P = [&](size_t offset) { return tensorAt(params, offset); };

  const size_t n = s.local;  // the rows of the norm (all N but with sequence parallelism)
  norm(a.input.data(), P(L.ln1w), P(L.ln1b), sized(acc_, a.ln1, n * h), sized(acc_, a.stats1a, n),
       sized(acc_, a.stats1b, n), n);
  const auto attentionStart = laps.lap(kNorm1);
  // q/k/v of the block's rows (kept for attention's backward unless Ulysses moves them).
  float* qkv = sized(acc_, s.ulysses ? w.qkvRows : a.qkv, N * Q);
  const float* ln1 = gatherShards(acc_, a.ln1.data(), w.gatheredA, s, h);
  product(acc_, false, true, N, Q, h, 1.0f, ln1, h, P(L.qkvw), h, 0.0f, qkv, Q);
  KernelTimer elementWise(KernelFamily::ElementWise);
  if (L.qkvb != BlockLayout::kNone) addBiasRows(acc_, k_, qkv, P(L.qkvb), N, Q);
  elementWise.stop();
  laps.lap(kQkv);
  if (c_.qkNorm) {
    KernelTimer norms(KernelFamily::Norms);
    qkNormForward(P(L.qknw), P(L.qknb), qkv, a, w, N);
  }
  KernelTimer attention(KernelFamily::Attention);
  const AttentionLayout at = attentionLayout(s);
  const kernels::AttentionShape& shape = at.shape;
  float* heads = qkv;
  if (s.ulysses) {
    heads = sized(acc_, a.qkv, shape.samples * shape.seq * shape.qkvStride());
    toHeadLayout(acc_, qkv, heads, s, at.qkvGroups, Q, w.exchange);
  }
  rotate(heads, shape, false);
  float* ctx =
      sized(acc_, s.ulysses ? a.ctxHeads : a.ctx, shape.samples * shape.seq * shape.ctxStride());
  const AttentionDropoutMasks drop(c_.attentionDropout, at.firstHead, shape, dropout);
  acc_.attentionForward(shape, heads, ctx, sized(acc_, a.attnStats, shape.statsSize()), drop.get());
  if (s.ulysses) {
    ctx = sized(acc_, a.ctx, N * hq);
    toPositionLayout(acc_, a.ctxHeads.data(), ctx, s, at.ctxGroups, hq, w.exchange);
  }
  attention.stop();
  laps.lap(kCore);
  outputProjection(ctx, hq, P(L.densew), P(L.denseb), w.attnOut, w, s, dropout, kSiteAttentionOut);
  laps.endPart(kDense, kAttention, attentionStart);
}

void BlockRunner::mlpForward(BlockTensors<const float> params, BlockActivations& a,
                             BlockWorkspace& w, const BlockShape& s, const DropoutKey* dropout,
                             Laps& laps) {
  const BlockLayout& L = layout_;
  // The rank's MLP columns (all of them at model size 1).
  const size_t N = s.rows, n = s.local, h = c_.hiddenSize, ff = slice_.ffn,
               ff1 = c_.gated() ? 2 * ff : ff;
  auto P = [&](size_t offset) { return tensorAt(params.block, offset); };

  const float* mlpIn = a.input.data();
  KernelTimer residual(KernelFamily::ElementWise);
  if (!c_.gptjResidual) {
    float* mid = sized(acc_, a.mid, n * h);
    sumRows(acc_, k_, mid, mlpIn, w.attnOut.data(), n, h);
    mlpIn = mid;
  } else {
    a.mid.clear();
  }
  residual.stop();
  if (c_.gptjTied) {  // the MLP reads norm1's output
    a.ln2.clear();
  } else {
    norm(mlpIn, P(L.ln2w), P(L.ln2b), sized(acc_, a.ln2, n * h), sized(acc_, a.stats2a, n),
         sized(acc_, a.stats2b, n), n);
  }
  const float* mlpNormed =
      gatherShards(acc_, c_.gptjTied ? a.ln1.data() : a.ln2.data(), w.gatheredB, s, h);
  const auto mlpStart = laps.lap(kNorm2);
  if (L.moe()) {  // the training pass's key draws its noise (Gpt passes one for MoE models)
    const moe::RoutingNoise noise(dropout ? dropout->sampleIds : nullptr,
                                  dropout ? dropout->layer : 0, s.seq, s.positionOffset);
    // Split over the model group, each rank's output is its experts' share of the sum.
    const bool split = slice_.model != nullptr;
    float* partial = sized(acc_, split && s.sequence ? w.partial : w.mlpOut, N * h);
    a.moe.stats = moe_.forward(moeTensors(params), mlpNormed, N, a.moe, w.moe, partial,
                               dropout ? &noise : nullptr, s.experts);
    if (split) reduceToShards(acc_, partial, w.mlpOut, s, h, slice_.model);
    laps.endPart(kFc1, kMlp, mlpStart);  // the profiler's experts slot (Gpt::profileModules)
    return;
  }
  float* fc1 = sized(acc_, a.fc1, N * ff1);
  product(acc_, false, true, N, ff1, h, 1.0f, mlpNormed, h, P(L.fc1w), h, 0.0f, fc1, ff1);
  laps.lap(kFc1);
  KernelTimer mlpElementWise(KernelFamily::ElementWise);
  float* act = sized(acc_, a.act, N * ff);
  const kernels::Unit unit = unitOf(c_.activation);
  // The bias goes in on the activation's pass, run of rows by run of rows: the second read of
  // fc1 then comes from cache (the flops profiler counts the bias in the activation's time).
  const float* fc1Bias = P(L.fc1b);
  parallelRows(acc_, N, [&](size_t r0, size_t r1) {
    if (fc1Bias) k_.addBias(fc1 + r0 * ff1, fc1Bias, r1 - r0, ff1);
    if (c_.gated())
      k_.gatedForward(unit, act + r0 * ff, fc1 + r0 * ff1, r1 - r0, ff);
    else
      k_.unitForward(unit, act + r0 * ff, fc1 + r0 * ff, (r1 - r0) * ff);
  });
  mlpElementWise.stop();
  laps.lap(kAct);
  outputProjection(act, ff, P(L.fc2w), P(L.fc2b), w.mlpOut, w, s, dropout, kSiteMlpOut);
  laps.endPart(kFc2, kMlp, mlpStart);
}

void BlockRunner::outputProjection(const float* x, size_t width, const float* weight,
                                   const float* bias, kernels::DeviceArray<float>& out,
                                   BlockWorkspace& w, const BlockShape& s,
                                   const DropoutKey* dropout, uint64_t site) const {
  const size_t N = s.rows, h = c_.hiddenSize;
  // Sequence parallel: the partial sums of all N rows, then this rank's rows of their sum in out.
  float* partial = sized(acc_, s.sequence ? w.partial : out, N * h);
  product(acc_, false, true, N, h, width, 1.0f, x, width, weight, width, 0.0f, partial, h);
  float* y = reduceToShards(acc_, partial, out, s, h, slice_.model);
  KernelTimer elementWise(KernelFamily::ElementWise);
  if (bias) addBiasRows(acc_, k_, y, bias, s.local, h);
  if (dropout && c_.hiddenDropout > 0.0)
    applyDropoutRows(y, s, h, static_cast<float>(c_.hiddenDropout), *dropout, site, acc_);
}

const float* BlockRunner::throughHiddenDropout(const float* from, BlockWorkspace& w,
                                               const BlockShape& s, const DropoutKey* dropout,
                                               uint64_t site) const {
  if (!(dropout && c_.hiddenDropout > 0.0)) return from;
  const size_t n = s.local, h = c_.hiddenSize;
  KernelTimer timer(KernelFamily::ElementWise);
  float* masked = sized(acc_, w.dA, n * h);
  acc_.copy(masked, from, n * h * sizeof(float), kernels::CopyKind::DeviceToDevice,
            acc_.currentStream());
  applyDropoutRows(masked, s, h, static_cast<float>(c_.hiddenDropout), *dropout, site, acc_);
  return masked;
}

void BlockRunner::backward(BlockTensors<const float> params, BlockTensors<float> grads,
                           const BlockActivations& a, BlockWorkspace& w, const BlockShape& s,
                           const float* dOut, float* dIn, const DropoutKey* dropout) {
  // dIn collects the residual paths: dOut, then norm2's and norm1's input gradients.
  const BlockLayout& L = layout_;
  const size_t h = c_.hiddenSize, normWeights = static_cast<size_t>(c_.normWeightSize());
  auto G = [&](size_t offset) { return tensorAt(grads.block, offset); };
  ShardedGradients sharded(s.sequence);  // the norms and row-parallel biases, from local rows
  for (size_t norm : {L.ln1w, L.ln2w}) sharded.add(G(norm), normWeights);
  // (A MoE layer's residual MLP takes every row: its output bias is not one of them.)
  for (size_t bias : {L.ln1b, L.ln2b, L.denseb, L.moe() ? BlockLayout::kNone : L.fc2b})
    sharded.add(G(bias), h);
  float* dLn = mlpBackward(params, grads, a, w, s, dOut, dIn, dropout);
  attentionBackward(params.block, grads.block, a, w, s, dOut, dIn, dLn, dropout);
  sharded.finish();
}

float* BlockRunner::mlpBackward(BlockTensors<const float> params, BlockTensors<float> grads,
                                const BlockActivations& a, BlockWorkspace& w, const BlockShape& s,
                                const float* dOut, float* dIn, const DropoutKey* dropout) {
  const BlockLayout& L = layout_;
  const size_t N = s.rows, n = s.local, h = c_.hiddenSize;
  auto P = [&](size_t offset) { return tensorAt(params.block, offset); };
  auto G = [&](size_t offset) { return tensorAt(grads.block, offset); };

  const bool tied = c_.gptjTied;
  const float* mlpNormed =
      gatherShards(acc_, tied ? a.ln1.data() : a.ln2.data(), w.gatheredB, s, h);
  float* dLn = sized(acc_, w.dB, N * h);  // tied: norm1's output gradient from the MLP, so far
  if (L.moe())                      // no dropout on a MoE layer's output; every row of it
    moe_.backward(moeTensors(params), moeTensors(grads), mlpNormed, N, a.moe, w.moe,
                  gatherShards(acc_, dOut, w.gatheredA, s, h), dLn, auxLossGrad_, s.experts);
  else
    denseMlpBackward(params.block, grads.block, a, w, s, dOut, mlpNormed, dLn, dropout);
  const float* mlpIn = c_.gptjResidual ? a.input.data() : a.mid.data();
  if (tied) {
    elementWise([&] {
      acc_.copy(dIn, dOut, n * h * sizeof(float), kernels::CopyKind::DeviceToDevice,
                acc_.currentStream());
    });
  } else {
    // Column-parallel's input gradient is the ranks' sum (tied, it is summed with QKV's first).
    const float* dNormed = reduceToShards(acc_, dLn, w.dLocal, s, h, slice_.model);
    normBackward(dNormed, mlpIn, P(L.ln2w), a.stats2a.data(), a.stats2b.data(), dIn, G(L.ln2w),
                 G(L.ln2b), n);
    elementWise(
        [&] { addRows(acc_, k_, dIn, dOut, n, h); });  // sequential: d(mid); gpt-j: d(x) so far
  }
  return dLn;
}

void BlockRunner::denseMlpBackward(const float* params, float* grads, const BlockActivations& a,
                                   BlockWorkspace& w, const BlockShape& s, const float* dOut,
                                   const float* mlpNormed, float* dLn, const DropoutKey* dropout) {
  const BlockLayout& L = layout_;
  const size_t N = s.rows, n = s.local, h = c_.hiddenSize, ff = slice_.ffn,
               ff1 = c_.gated() ? 2 * ff : ff;
  auto P = [&](size_t offset) { return tensorAt(params, offset); };
  auto G = [&](size_t offset) { return tensorAt(grads, offset); };
  // dOut reaches mlpOut through the residual sum (the rank's rows; all N gathered for the products).
  const float* dMlpLocal = throughHiddenDropout(dOut, w, s, dropout, kSiteMlpOut);
  if (L.fc2b != BlockLayout::kNone)
    elementWise([&] { biasGradientRows(acc_, k_, G(L.fc2b), dMlpLocal, n, h, normPartials_); });
  const float* dMlp = gatherShards(acc_, dMlpLocal, w.gatheredA, s, h);
  product(acc_, true, false, h, ff, N, 1.0f, dMlp, h, a.act.data(), ff, 1.0f, G(L.fc2w), ff);
  float* dAct = sized(acc_, w.dact, N * ff);
  product(acc_, false, false, N, ff, h, 1.0f, dMlp, h, P(L.fc2w), ff, 0.0f, dAct, ff);
  float* dFc1 = sized(acc_, w.dfc1, N * ff1);
  const kernels::Unit unit = unitOf(c_.activation);
  auto activationBackward = [&](size_t r0, size_t r1) {
    const float* in = a.fc1.data();
    if (c_.gated())
      k_.gatedBackward(unit, dFc1 + r0 * ff1, dAct + r0 * ff, in + r0 * ff1, r1 - r0, ff);
    else
      k_.unitBackward(unit, dFc1 + r0 * ff, dAct + r0 * ff, in + r0 * ff, (r1 - r0) * ff);
  };
  // With a bias, its gradient sums each block of rows right after the activation's backward wrote
  // it, while it is in cache.
  if (L.fc1b != BlockLayout::kNone)
    elementWise([&] {
      biasGradientRows(acc_, k_, G(L.fc1b), dFc1, N, ff1, normPartials_, activationBackward);
    });
  else
    elementWise([&] { parallelRows(acc_, N, activationBackward); });
  product(acc_, true, false, ff1, h, N, 1.0f, dFc1, ff1, mlpNormed, h, 1.0f, G(L.fc1w), h);
  product(acc_, false, false, N, h, ff1, 1.0f, dFc1, ff1, P(L.fc1w), h, 0.0f, dLn, h);
}

template <class T>
MoeTensors<T> BlockRunner::moeTensors(BlockTensors<T> tensors) const {
  const BlockLayout& L = layout_;
  T* base = tensors.block;
  MoeTensors<T> t;
  t.router = tensorAt(base, L.routerw);
  if (!tensors.experts) throw Error("a MoE layer needs its experts' layer");
  for (size_t e = 0; e < L.experts; ++e) {
    T* first = tensors.experts + e * L.expertStride;
    t.experts.push_back({tensorAt(first, L.expert.fc1w), tensorAt(first, L.expert.fc1b),
                         tensorAt(first, L.expert.fc2w), tensorAt(first, L.expert.fc2b)});
  }
  t.residual = {tensorAt(base, L.fc1w), tensorAt(base, L.fc1b), tensorAt(base, L.fc2w),
                tensorAt(base, L.fc2b)};
  t.coefw = tensorAt(base, L.coefw);
  t.coefb = tensorAt(base, L.coefb);
  return t;
}

void BlockRunner::attentionBackward(const float* params, float* grads, const BlockActivations& a,
                                    BlockWorkspace& w, const BlockShape& s, const float* dOut,
                                    float* dIn, float* dLn, const DropoutKey* dropout) {
  const BlockLayout& L = layout_;
  const size_t N = s.rows, n = s.local, h = c_.hiddenSize, hq = slice_.heads * c_.headDim(),
               Q = hq + 2 * slice_.kvHeads * c_.headDim();
  auto P = [&](size_t offset) { return tensorAt(params, offset); };
  auto G = [&](size_t offset) { return tensorAt(grads, offset); };

  // Its output feeds mid (sequential) or out (gpt-j) (dIn is added to only after its last use
  // here).
  const float* dAttnLocal =
      throughHiddenDropout(c_.gptjResidual ? dOut : dIn, w, s, dropout, kSiteAttentionOut);
  if (L.denseb != BlockLayout::kNone)
    elementWise([&] { biasGradientRows(acc_, k_, G(L.denseb), dAttnLocal, n, h, normPartials_); });
  const float* dAttn = gatherShards(acc_, dAttnLocal, w.gatheredA, s, h);
  product(acc_, true, false, h, hq, N, 1.0f, dAttn, h, a.ctx.data(), hq, 1.0f, G(L.densew), hq);
  float* dCtx = sized(acc_, w.dctx, N * hq);
  product(acc_, false, false, N, hq, h, 1.0f, dAttn, h, P(L.densew), hq, 0.0f, dCtx, hq);

  float* dqkv = sized(acc_, w.dqkv, N * Q);
  KernelTimer attention(KernelFamily::Attention);
  const AttentionLayout at = attentionLayout(s);
  const kernels::AttentionShape& shape = at.shape;
  const size_t headRows = shape.samples * shape.seq;
  const float* dCtxHeads = dCtx;
  float* dqkvHeads = dqkv;
  if (s.ulysses) {
    float* moved = sized(acc_, w.dCtxHeads, headRows * shape.ctxStride());
    toHeadLayout(acc_, dCtx, moved, s, at.ctxGroups, hq, w.exchange);
    dCtxHeads = moved;
    dqkvHeads = sized(acc_, w.dqkvHeads, headRows * shape.qkvStride());
  }
  const AttentionDropoutMasks drop(c_.attentionDropout, at.firstHead, shape, dropout);
  acc_.attentionBackward(shape, a.qkv.data(), (s.ulysses ? a.ctxHeads : a.ctx).data(),
                         a.attnStats.data(), dCtxHeads, dqkvHeads, drop.get());
  rotate(dqkvHeads, shape, true);
  if (s.ulysses) toPositionLayout(acc_, dqkvHeads, dqkv, s, at.qkvGroups, Q, w.exchange);
  attention.stop();
  if (c_.qkNorm) {
    KernelTimer norms(KernelFamily::Norms);
    qkNormBackward(P(L.qknw), G(L.qknw), G(L.qknb), dqkv, a, w, N);
  }
  const float* ln1 = gatherShards(acc_, a.ln1.data(), w.gatheredB, s, h);
  product(acc_, true, false, Q, h, N, 1.0f, dqkv, Q, ln1, h, 1.0f, G(L.qkvw), h);
  if (L.qkvb != BlockLayout::kNone)
    elementWise([&] { biasGradientRows(acc_, k_, G(L.qkvb), dqkv, N, Q, normPartials_); });
  const bool tied = c_.gptjTied;
  product(acc_, false, false, N, h, Q, 1.0f, dqkv, Q, P(L.qkvw), h, tied ? 1.0f : 0.0f, dLn, h);
  const float* dNormed = reduceToShards(acc_, dLn, w.dLocal, s, h, slice_.model);
  float* dNorm1 = sized(acc_, w.dA, n * h);
  normBackward(dNormed, a.input.data(), P(L.ln1w), a.stats1a.data(), a.stats1b.data(), dNorm1,
               G(L.ln1w), G(L.ln1b), n);
  elementWise([&] { addRows(acc_, k_, dIn, dNorm1, n, h); });
}

}  // namespace ds::runtime::gpt
