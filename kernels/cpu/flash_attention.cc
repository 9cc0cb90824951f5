// Flash attention on the CPU (see flash_attention.h). Every tile of the backward is computed by the
// same calls in both pass layouts and added into its outputs in the same order (dQ over key tiles
// ascending, dK/dV over the group's heads then query tiles ascending), so Fused and Split give the
// same bits at any thread count.
#include "kernels/cpu/flash_attention.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "common/error.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/parallel_for.h"

namespace ds::kernels {
namespace {

// Query rows per tile: 64, or 128 from sequences of 2048 on (bench_attention, the Xeon, 1 thread:
// 128-row tiles ran 5-7% faster at seq 4096, their products 10-20% faster, but 15% slower at the
// demo's seq 128, where a tile's masked half is a quarter of the work).
constexpr size_t kQueryBlock = 64, kLongQueryBlock = 128, kLongSequence = 2048;
constexpr size_t kMinKeyBlock = 64, kMaxKeyBlock = 512;

size_t l2CacheBytes() {
  static const size_t bytes = [] {
    const long v = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return v > 0 ? static_cast<size_t>(v) : size_t{1} << 20;  // unknown: a modest 1 MiB
  }();
  return bytes;
}

// The sizes and tiles of one call. Query tile r holds rows [r0(r), r1(r)), key tile c keys
// [c0(c), c1(c)); tile (r, c) is computed over keys [c0, min(c1, r1)), the last query's end.
struct Grid {
  size_t T, H, KV, group, d, Q, hq, window, bq, bk, queryTiles, keyTiles;
  float scale;

  explicit Grid(const AttentionShape& s)
      : T(s.seq),
        H(s.heads),
        KV(s.kvHeads),
        group(s.heads / s.kvHeads),
        d(s.headDim),
        Q(s.qkvStride()),
        hq(s.ctxStride()),
        window(s.window),
        scale(1.0f / std::sqrt(static_cast<float>(s.headDim))) {
    const AttentionTiles tiles = attentionTiles(s);
    bq = tiles.queryBlock;
    bk = tiles.keyBlock;
    queryTiles = (T + bq - 1) / bq;
    keyTiles = (T + bk - 1) / bk;
  }
  size_t r0(size_t r) const { return r * bq; }
  size_t r1(size_t r) const { return std::min(T, (r + 1) * bq); }
  size_t c0(size_t c) const { return c * bk; }
  size_t c1(size_t c) const { return std::min(T, (c + 1) * bk); }
  size_t cols(size_t r, size_t c) const { return std::min(c1(c), r1(r)) - c0(c); }
  // The key tiles query tile r sees, [firstKeyTile, lastKeyTile].
  size_t firstKeyTile(size_t r) const { return (r0(r) > window ? r0(r) - window : 0) / bk; }
  size_t lastKeyTile(size_t r) const { return (r1(r) - 1) / bk; }
  // The query tiles that see key tile c, [firstQueryTile, lastQueryTile].
  size_t firstQueryTile(size_t c) const { return c0(c) / bq; }
  size_t lastQueryTile(size_t c) const {
    const size_t last = c1(c) - 1, reach = T - 1 - last;  // queries after the tile's last key
    return (last + std::min(window, reach)) / bq;
  }
};

// Scratch reused by a thread across tiles and calls: tiles are small and many.
float* scratch(size_t floats) {
  thread_local std::vector<float> buffer;
  if (buffer.size() < floats) buffer.resize(floats);
  return buffer.data();
}

// Dropout on rows [r0, r0 + rows) of a tile starting at key c0, in place or into `out`.
void dropTile(const TransformerKernels& k, const AttentionDropout& drop, const Grid& g, size_t b,
              size_t head, size_t r0, size_t rows, size_t c0, size_t cols, const float* in,
              float* out) {
  for (size_t i = 0; i < rows; ++i) {
    const uint64_t first = drop.firstElement + (head * g.T + r0 + i) * g.T + c0;
    k.dropout(in + i * g.bk, out + i * g.bk, cols, drop.sampleBases[b], first, drop.threshold,
              drop.keepScale);
  }
}

// The operands of one (sample, head) of a call.
struct HeadView {
  const float* q;  // rows Q apart
  const float* key;
  const float* value;
  size_t ctxAt;  // element of ctx / dCtx where row 0 of the head starts (rows hq apart)
  size_t statsAt;
};
HeadView headView(const Grid& g, const float* qkv, size_t b, size_t head) {
  const float* sample = qkv + b * g.T * g.Q;
  const float* key = sample + g.hq + (head / g.group) * g.d;
  return {sample + head * g.d, key, key + g.KV * g.d, b * g.T * g.hq + head * g.d,
          (b * g.H + head) * 2 * g.T};
}

}  // namespace

AttentionTiles attentionTiles(const AttentionShape& s) {
  AttentionTiles t{s.tiling.queryBlock ? s.tiling.queryBlock
                                       : s.seq >= kLongSequence ? kLongQueryBlock : kQueryBlock,
                   s.tiling.keyBlock};
  if (!t.keyBlock) {
    // Per key of a tile: its key and value rows (2 d floats) and a column of the scores, their
    // gradient and the dropped-out probabilities (3 bq floats).
    const size_t perKey = (2 * s.headDim + 3 * t.queryBlock) * sizeof(float);
    const size_t fit = l2CacheBytes() / 2 / perKey / kMinKeyBlock * kMinKeyBlock;
    t.keyBlock = std::clamp(fit, kMinKeyBlock, kMaxKeyBlock);
  }
  return t;
}

void flashAttentionForward(const TransformerKernels& k, const AttentionShape& s, const float* qkv,
                           float* ctx, float* stats, const AttentionDropout* dropout) {
  const Grid g(s);
  parallelFor(s.samples * g.H * g.queryTiles, [&](size_t task) {
    const size_t r = task % g.queryTiles, head = task / g.queryTiles % g.H,
                 b = task / g.queryTiles / g.H;
    const HeadView v = headView(g, qkv, b, head);
    const size_t r0 = g.r0(r), rows = g.r1(r) - r0;
    float* out = ctx + v.ctxAt + r0 * g.hq;
    float* rowMax = stats + v.statsAt + r0;
    float* rowSum = rowMax + g.T;
    std::fill(rowMax, rowMax + rows, -std::numeric_limits<float>::infinity());
    float* tile = scratch(g.bq * g.bk);
    for (size_t c = g.firstKeyTile(r); c <= g.lastKeyTile(r); ++c) {
      const size_t c0 = g.c0(c), cols = g.cols(r, c);
      matmul(false, true, rows, cols, g.d, g.scale, v.q + r0 * g.Q, g.Q, v.key + c0 * g.Q, g.Q,
             0.0f, tile, g.bk);
      k.attentionTileSoftmax(tile, g.bk, rows, cols, r0, c0, g.window, rowMax, rowSum, out, g.hq,
                             g.d);
      if (dropout) dropTile(k, *dropout, g, b, head, r0, rows, c0, cols, tile, tile);
      matmul(false, false, rows, g.d, cols, 1.0f, tile, g.bk, v.value + c0 * g.Q, g.Q, 1.0f, out,
             g.hq);
    }
    k.attentionRowsFinish(out, g.hq, g.d, rows, rowSum);
  });
}

namespace {

// One call's backward: the operands, D = rowDot(dCtx, ctx) per row, and the tile step both pass
// layouts run.
class Backward {
 public:
  Backward(const TransformerKernels& k, const AttentionShape& s, const float* qkv,
           const float* ctx, const float* stats, const float* dCtx, float* dqkv,
           const AttentionDropout* dropout)
      : k_(k), g_(s), qkv_(qkv), stats_(stats), dCtx_(dCtx), dqkv_(dqkv), dropout_(dropout),
        rowDot_(s.samples * s.heads * s.seq) {
    parallelFor(s.samples * g_.H, [&](size_t bh) {
      const HeadView v = headView(g_, qkv_, bh / g_.H, bh % g_.H);
      k_.rowDots(rowDot_.data() + bh * g_.T, dCtx + v.ctxAt, g_.hq, ctx + v.ctxAt, g_.hq, g_.T,
                 g_.d);
    });
  }

  const Grid& grid() const { return g_; }

  // Zeroes rows [from, to) of dq for `head`, or of dk and dv for `kvHead`.
  void zeroQueries(size_t b, size_t head, size_t from, size_t to) {
    zeroColumns(b, head * g_.d, g_.d, from, to);
  }
  void zeroKeysValues(size_t b, size_t kvHead, size_t from, size_t to) {
    zeroColumns(b, g_.hq + kvHead * g_.d, g_.d, from, to);
    zeroColumns(b, g_.hq + (g_.KV + kvHead) * g_.d, g_.d, from, to);
  }

  // Tile (r, c) of (b, head): dS into the tile's dS buffer, then what `want` asks added into dqkv:
  // dK and dV of key tile c, dQ of query tile r.
  enum Want { kKeysValues = 1, kQueries = 2 };
  void tile(size_t b, size_t head, size_t r, size_t c, int want) {
    const HeadView v = headView(g_, qkv_, b, head);
    const size_t r0 = g_.r0(r), rows = g_.r1(r) - r0, c0 = g_.c0(c), cols = g_.cols(r, c);
    const size_t tileSize = g_.bq * g_.bk;
    float* p = scratch(3 * tileSize);
    float* dS = p + tileSize;
    float* dropped = dS + tileSize;
    const float* rowMax = stats_ + v.statsAt + r0;
    const float* dOut = dCtx_ + v.ctxAt + r0 * g_.hq;
    matmul(false, true, rows, cols, g_.d, g_.scale, v.q + r0 * g_.Q, g_.Q, v.key + c0 * g_.Q, g_.Q,
           0.0f, p, g_.bk);
    k_.attentionTileProbs(p, g_.bk, rows, cols, r0, c0, g_.window, rowMax, rowMax + g_.T);
    matmul(false, true, rows, cols, g_.d, 1.0f, dOut, g_.hq, v.value + c0 * g_.Q, g_.Q, 0.0f, dS,
           g_.bk);
    const float* used = p;  // what multiplied v in the forward
    if (dropout_) {
      if (want & kKeysValues) {
        dropTile(k_, *dropout_, g_, b, head, r0, rows, c0, cols, p, dropped);
        used = dropped;
      }
      dropTile(k_, *dropout_, g_, b, head, r0, rows, c0, cols, dS, dS);
    }
    k_.attentionTileScoreGrad(dS, p, g_.bk, rows, cols,
                              rowDot_.data() + (b * g_.H + head) * g_.T + r0);
    float* sample = dqkv_ + b * g_.T * g_.Q;
    if (want & kKeysValues) {
      float* dKey = sample + g_.hq + (head / g_.group) * g_.d + c0 * g_.Q;
      matmul(true, false, cols, g_.d, rows, 1.0f, used, g_.bk, dOut, g_.hq, 1.0f,
             dKey + g_.KV * g_.d, g_.Q);
      matmul(true, false, cols, g_.d, rows, g_.scale, dS, g_.bk, v.q + r0 * g_.Q, g_.Q, 1.0f, dKey,
             g_.Q);
    }
    if (want & kQueries)
      matmul(false, false, rows, g_.d, cols, g_.scale, dS, g_.bk, v.key + c0 * g_.Q, g_.Q, 1.0f,
             sample + head * g_.d + r0 * g_.Q, g_.Q);
  }

 private:
  void zeroColumns(size_t b, size_t column, size_t width, size_t from, size_t to) {
    float* at = dqkv_ + (b * g_.T + from) * g_.Q + column;
    for (size_t i = from; i < to; ++i, at += g_.Q) std::fill(at, at + width, 0.0f);
  }

  const TransformerKernels& k_;
  const Grid g_;
  const float* qkv_;
  const float* stats_;
  const float* dCtx_;
  float* dqkv_;
  const AttentionDropout* dropout_;
  std::vector<float> rowDot_;
};

// One task per (sample, key/value head): each key tile's dK and dV, and every query tile's dQ
// as the key tiles go by.
void fusedBackward(Backward& bw, size_t samples) {
  const Grid& g = bw.grid();
  parallelFor(samples * g.KV, [&](size_t task) {
    const size_t b = task / g.KV, kvHead = task % g.KV;
    bw.zeroKeysValues(b, kvHead, 0, g.T);
    for (size_t j = 0; j < g.group; ++j) bw.zeroQueries(b, kvHead * g.group + j, 0, g.T);
    for (size_t c = 0; c < g.keyTiles; ++c)
      for (size_t j = 0; j < g.group; ++j)
        for (size_t r = g.firstQueryTile(c); r <= g.lastQueryTile(c); ++r)
          bw.tile(b, kvHead * g.group + j, r, c, Backward::kKeysValues | Backward::kQueries);
  });
}

void splitBackward(Backward& bw, size_t samples) {
  const Grid& g = bw.grid();
  parallelFor(samples * g.KV * g.keyTiles, [&](size_t task) {
    const size_t c = task % g.keyTiles, kvHead = task / g.keyTiles % g.KV,
                 b = task / g.keyTiles / g.KV;
    bw.zeroKeysValues(b, kvHead, g.c0(c), g.c1(c));
    for (size_t j = 0; j < g.group; ++j)
      for (size_t r = g.firstQueryTile(c); r <= g.lastQueryTile(c); ++r)
        bw.tile(b, kvHead * g.group + j, r, c, Backward::kKeysValues);
  });
  parallelFor(samples * g.H * g.queryTiles, [&](size_t task) {
    const size_t r = task % g.queryTiles, head = task / g.queryTiles % g.H,
                 b = task / g.queryTiles / g.H;
    bw.zeroQueries(b, head, g.r0(r), g.r1(r));
    for (size_t c = g.firstKeyTile(r); c <= g.lastKeyTile(r); ++c)
      bw.tile(b, head, r, c, Backward::kQueries);
  });
}

}  // namespace

void flashAttentionBackward(const TransformerKernels& k, const AttentionShape& s,
                            const float* qkv, const float* ctx, const float* stats,
                            const float* dCtx, float* dqkv, const AttentionDropout* dropout) {
  Backward bw(k, s, qkv, ctx, stats, dCtx, dqkv, dropout);
  AttentionBackwardPasses passes = s.tiling.passes;
  if (passes == AttentionBackwardPasses::Auto)
    passes = s.samples * s.kvHeads < 2 * static_cast<size_t>(std::max(1, matmulThreads()))
                 ? AttentionBackwardPasses::Split
                 : AttentionBackwardPasses::Fused;
  if (passes == AttentionBackwardPasses::Split)
    splitBackward(bw, s.samples);
  else
    fusedBackward(bw, s.samples);
}

}  // namespace ds::kernels
