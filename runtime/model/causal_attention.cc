// Causal attention per block of query rows (see causal_attention.h). Every product keeps the
// full-[T, T] computation's operands and only drops key columns whose probabilities are exactly
// zero, so results differ from it by the order of the (shorter) sums alone.
#include "runtime/model/causal_attention.h"

#include <cmath>

#include "runtime/model/parallel_loops.h"

namespace ds::runtime::gpt {

using kernels::gemmF32;

AttentionBlocks::AttentionBlocks(size_t seq, size_t window, size_t block)
    : seq_(seq), window_(window), block_(block), count_((seq + block - 1) / block) {}

size_t AttentionBlocks::firstKey(size_t b) const {
  const size_t r0 = begin(b);
  return r0 > window_ ? (r0 - window_) / block_ * block_ : 0;
}

size_t AttentionBlocks::lastQuery(size_t c) const {
  // firstKey grows with the row block: the rows that computed key block c are a run from c on.
  size_t b = c;
  while (b + 1 < count_ && firstKey(b + 1) <= begin(c)) ++b;
  return end(b);
}

void attentionProbs(const kernels::TransformerKernels& k, const AttentionShape& s, const float* qkv,
                    float* probs, float* ctx, kernels::Accelerator& acc) {
  const size_t T = s.seq, H = s.heads, d = s.headDim, Q = s.qkvStride(), hq = s.ctxStride(),
               group = H / s.kvHeads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const AttentionBlocks blocks(T, s.window, s.block);
  parallelFor(s.samples * H, [&](size_t bh) {
    const size_t b = bh / H, head = bh % H;
    const float* q = qkv + b * T * Q + head * d;
    const float* key = qkv + b * T * Q + hq + (head / group) * d;
    const float* v = key + s.kvHeads * d;
    float* p = probs + bh * T * T;
    for (size_t rb = 0; rb < blocks.count(); ++rb) {
      const size_t r0 = blocks.begin(rb), r1 = blocks.end(rb), lo = blocks.firstKey(rb);
      float* rect = p + r0 * T + lo;
      gemmF32(acc, false, true, r1 - r0, r1 - lo, d, scale, q + r0 * Q, Q, key + lo * Q, Q, 0.0f,
              rect, T);
      k.causalSoftmaxRows(p, T, r0, r1, s.window, lo, r1);
      if (ctx)
        gemmF32(acc, false, false, r1 - r0, d, r1 - lo, 1.0f, rect, T, v + lo * Q, Q, 0.0f,
                ctx + (b * T + r0) * hq + head * d, hq);
    }
  });
}

void attentionContext(const AttentionShape& s, const float* qkv, const float* probs, float* ctx,
                      kernels::Accelerator& acc) {
  const size_t T = s.seq, H = s.heads, d = s.headDim, Q = s.qkvStride(), hq = s.ctxStride(),
               group = H / s.kvHeads;
  const AttentionBlocks blocks(T, s.window, s.block);
  parallelFor(s.samples * H, [&](size_t bh) {
    const size_t b = bh / H, head = bh % H;
    const float* v = qkv + b * T * Q + hq + (s.kvHeads + head / group) * d;
    const float* p = probs + bh * T * T;
    for (size_t rb = 0; rb < blocks.count(); ++rb) {
      const size_t r0 = blocks.begin(rb), r1 = blocks.end(rb), lo = blocks.firstKey(rb);
      gemmF32(acc, false, false, r1 - r0, d, r1 - lo, 1.0f, p + r0 * T + lo, T, v + lo * Q, Q, 0.0f,
              ctx + (b * T + r0) * hq + head * d, hq);
    }
  });
}

// Both halves run one task per key/value head: the query heads of its group add into its dK and
// dV in turn (the first one writes), key block by key block.
void attentionBackwardValues(const AttentionShape& s, const float* qkv, const float* probs,
                             const float* dCtx, float* dProbs, float* dqkv,
                             kernels::Accelerator& acc) {
  const size_t T = s.seq, H = s.heads, KV = s.kvHeads, d = s.headDim, Q = s.qkvStride(),
               hq = s.ctxStride(), group = H / KV;
  const AttentionBlocks blocks(T, s.window, s.block);
  parallelFor(s.samples * KV, [&](size_t bk) {
    const size_t b = bk / KV, kvHead = bk % KV, vAt = b * T * Q + hq + (KV + kvHead) * d;
    for (size_t j = 0; j < group; ++j) {
      const size_t head = kvHead * group + j, pAt = (b * H + head) * T * T;
      const float* dc = dCtx + b * T * hq + head * d;
      for (size_t rb = 0; rb < blocks.count(); ++rb) {
        const size_t r0 = blocks.begin(rb), r1 = blocks.end(rb), lo = blocks.firstKey(rb);
        gemmF32(acc, false, true, r1 - r0, r1 - lo, d, 1.0f, dc + r0 * hq, hq, qkv + vAt + lo * Q,
                Q, 0.0f, dProbs + pAt + r0 * T + lo, T);
      }
      for (size_t cb = 0; cb < blocks.count(); ++cb) {
        const size_t c0 = blocks.begin(cb), c1 = blocks.end(cb), hi = blocks.lastQuery(cb);
        gemmF32(acc, true, false, c1 - c0, d, hi - c0, 1.0f, probs + pAt + c0 * T + c0, T,
                dc + c0 * hq, hq, j ? 1.0f : 0.0f, dqkv + vAt + c0 * Q, Q);
      }
    }
  });
}

void attentionBackwardScores(const kernels::TransformerKernels& k, const AttentionShape& s,
                             const float* qkv, const float* probs, float* dProbs, float* dqkv,
                             kernels::Accelerator& acc) {
  const size_t T = s.seq, H = s.heads, KV = s.kvHeads, d = s.headDim, Q = s.qkvStride(),
               hq = s.ctxStride(), group = H / KV;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const AttentionBlocks blocks(T, s.window, s.block);
  parallelFor(s.samples * KV, [&](size_t bk) {
    const size_t b = bk / KV, kvHead = bk % KV, kAt = b * T * Q + hq + kvHead * d;
    for (size_t j = 0; j < group; ++j) {
      const size_t head = kvHead * group + j, pAt = (b * H + head) * T * T;
      const size_t qAt = b * T * Q + head * d;
      float* dS = dProbs + pAt;
      const float* p = probs + pAt;
      // Outside a row's visible keys p is zero, so d(scores) there is too: every rectangle of dS
      // read below holds zeros wherever the row does not see the key.
      for (size_t rb = 0; rb < blocks.count(); ++rb) {
        const size_t r0 = blocks.begin(rb), r1 = blocks.end(rb), lo = blocks.firstKey(rb);
        k.softmaxBackwardStrided(dS + r0 * T + lo, p + r0 * T + lo, r1 - r0, r1 - lo, T);
        gemmF32(acc, false, false, r1 - r0, d, r1 - lo, scale, dS + r0 * T + lo, T,
                qkv + kAt + lo * Q, Q, 0.0f, dqkv + qAt + r0 * Q, Q);
      }
      for (size_t cb = 0; cb < blocks.count(); ++cb) {
        const size_t c0 = blocks.begin(cb), c1 = blocks.end(cb), hi = blocks.lastQuery(cb);
        gemmF32(acc, true, false, c1 - c0, d, hi - c0, scale, dS + c0 * T + c0, T,
                qkv + qAt + c0 * Q, Q, j ? 1.0f : 0.0f, dqkv + kAt + c0 * Q, Q);
      }
    }
  });
}

}  // namespace ds::runtime::gpt
