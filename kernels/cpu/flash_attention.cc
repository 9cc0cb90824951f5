// Flash attention on the CPU (see flash_attention.h). Every tile of the backward is computed by the
// same calls in both pass layouts and added into its outputs in the same order (dQ over key tiles
// ascending, dK/dV over the group's heads then query tiles ascending), so Fused and Split give the
// same bits at any thread count.
#include "kernels/cpu/flash_attention.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
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
  // Whether tasks read head-major copies (HeadCopies): only when a head's keys span several key
  // tiles, which the tiles then sweep again and again. Within one tile (the demo's seq 128) the
  // copies cost more than they save: flash went from 0.92 to 0.85x the stored attention there.
  bool copyHeads() const { return keyTiles > 1; }
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

// The copies one task reads where Grid::copyHeads, head-major: each (sample, head) operand it uses
// as a contiguous [seq, headDim] block. The tile products then read rows headDim floats apart
// instead of a whole qkv row apart (9 KB at GPT-2 small, so that every key of a tile sits on a
// page of its own), which ran the forward's products 15-27% faster at seq 4096 (one head's tiles
// swept through oneDNN, the Xeon, 1 thread). A thread keeps its copies across its tasks of one
// call: a static schedule gives it consecutive tasks, mostly of one head, so each head is copied
// about once per call. They live in the thread's own buffer, reused across calls: a fresh
// allocation's page faults cost more than the copies (7% of bench_attention's time at seq 4096).
struct Operand {
  const float* rows;  // row t of the (sample, head) at rows + t * ld
  size_t ld;
};
class HeadCopies {
 public:
  // The copies of `operands` (seq rows of headDim each, in that order) for task key `key`, made
  // now unless this thread's copies already are those.
  static const float* of(uint64_t call, size_t b, size_t kvHead, const Grid& g,
                         const std::vector<Operand>& operands) {
    thread_local HeadCopies mine;
    if (mine.call_ != call || mine.b_ != b || mine.kvHead_ != kvHead) {
      const size_t block = g.T * g.d;
      if (mine.data_.size() < operands.size() * block) mine.data_.resize(operands.size() * block);
      for (size_t i = 0; i < operands.size(); ++i)
        for (size_t t = 0; t < g.T; ++t)
          std::copy_n(operands[i].rows + t * operands[i].ld, g.d,
                      mine.data_.data() + i * block + t * g.d);
      mine.call_ = call;
      mine.b_ = b;
      mine.kvHead_ = kvHead;
    }
    return mine.data_.data();
  }

 private:
  uint64_t call_ = 0;
  size_t b_ = 0, kvHead_ = 0;
  std::vector<float> data_;
};

// Tells one call's copies from the last one's, whose operands may sit at the same addresses.
uint64_t newCall() {
  static std::atomic<uint64_t> calls{0};
  return ++calls;
}

}  // namespace

AttentionTiles attentionTiles(const AttentionShape& s) {
  AttentionTiles t{s.tiling.queryBlock      ? s.tiling.queryBlock
                   : s.seq >= kLongSequence ? kLongQueryBlock
                                            : kQueryBlock,
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
  const uint64_t call = newCall();
  parallelFor(s.samples * g.H * g.queryTiles, [&](size_t task) {
    const size_t r = task % g.queryTiles, head = task / g.queryTiles % g.H,
                 b = task / g.queryTiles / g.H, kvHead = head / g.group;
    const float* sample = qkv + b * g.T * g.Q;
    const float* keys = sample + g.hq + kvHead * g.d;
    const float* values = keys + g.KV * g.d;
    size_t kvLd = g.Q;
    if (g.copyHeads()) {
      keys = HeadCopies::of(call, b, kvHead, g, {{keys, g.Q}, {values, g.Q}});
      values = keys + g.T * g.d;
      kvLd = g.d;
    }
    const size_t r0 = g.r0(r), rows = g.r1(r) - r0;
    float* out = ctx + b * g.T * g.hq + head * g.d + r0 * g.hq;
    float* rowMax = stats + (b * g.H + head) * 2 * g.T + r0;
    float* rowSum = rowMax + g.T;
    std::fill(rowMax, rowMax + rows, -std::numeric_limits<float>::infinity());
    float* tile = scratch(g.bq * g.bk);
    for (size_t c = g.firstKeyTile(r); c <= g.lastKeyTile(r); ++c) {
      const size_t c0 = g.c0(c), cols = g.cols(r, c);
      matmul(false, true, rows, cols, g.d, g.scale, sample + head * g.d + r0 * g.Q, g.Q,
             keys + c0 * kvLd, kvLd, 0.0f, tile, g.bk);
      k.attentionTileSoftmax(tile, g.bk, rows, cols, r0, c0, g.window, rowMax, rowSum, out, g.hq,
                             g.d);
      if (dropout) dropTile(k, *dropout, g, b, head, r0, rows, c0, cols, tile, tile);
      matmul(false, false, rows, g.d, cols, 1.0f, tile, g.bk, values + c0 * kvLd, kvLd, 1.0f, out,
             g.hq);
    }
    k.attentionRowsFinish(out, g.hq, g.d, rows, rowSum);
  });
}

namespace {

// Where a backward task reads its (sample, key/value head): row t of group member j's q at q + j *
// qStep + t * qLd, of its dCtx at dOut + j * dOutStep + t * dOutLd, of k and v at key / value +
// t * kvLd; in HeadCopies or where the caller's arrays hold them.
struct HeadOperands {
  const float* q;
  size_t qStep, qLd;
  const float* dOut;
  size_t dOutStep, dOutLd;
  const float* key;
  const float* value;
  size_t kvLd;
};

// Where a tile's gradients go: head-major blocks (rows headDim apart) whose first rows are query
// dqFirst of dq and key kvFirst of dk and dv.
struct TileGrads {
  float* dq;
  size_t dqFirst;
  float* dk;
  float* dv;
  size_t kvFirst;
};

// A head-major block of gradient rows a task adds into, written to dqkv when the task is done.
class GradRows {
 public:
  // `slots` blocks of `rows` rows, zeroed.
  GradRows(size_t slots, size_t rows, size_t d) : rows_(rows), d_(d) {
    thread_local std::vector<float> mine;
    if (mine.size() < slots * rows * d) mine.resize(slots * rows * d);
    data_ = mine.data();
    std::fill(data_, data_ + slots * rows * d, 0.0f);
  }
  float* slot(size_t i) const { return data_ + i * rows_ * d_; }
  // Block i to rows [first, first + rows) of dqkv's columns [column, column + d).
  void write(size_t i, float* dqkv, size_t ld, size_t first, size_t column, size_t rows) const {
    for (size_t t = 0; t < rows; ++t)
      std::copy_n(slot(i) + t * d_, d_, dqkv + (first + t) * ld + column);
  }

 private:
  size_t rows_, d_;
  float* data_;
};

// One call's backward: the operands, D = rowDot(dCtx, ctx) per row, and the tile step both pass
// layouts run.
class Backward {
 public:
  Backward(const TransformerKernels& k, const AttentionShape& s, const float* qkv, const float* ctx,
           const float* stats, const float* dCtx, float* dqkv, const AttentionDropout* dropout)
      : k_(k),
        g_(s),
        call_(newCall()),
        qkv_(qkv),
        stats_(stats),
        dCtx_(dCtx),
        dqkv_(dqkv),
        dropout_(dropout),
        rowDot_(s.samples * s.heads * s.seq) {
    parallelFor(s.samples * g_.H, [&](size_t bh) {
      const size_t at = (bh / g_.H) * g_.T * g_.hq + (bh % g_.H) * g_.d;
      k_.rowDots(rowDot_.data() + bh * g_.T, dCtx + at, g_.hq, ctx + at, g_.hq, g_.T, g_.d);
    });
  }

  const Grid& grid() const { return g_; }

  HeadOperands operands(size_t b, size_t kvHead) const {
    const float* q = qkv_ + b * g_.T * g_.Q + kvHead * g_.group * g_.d;
    const float* dOut = dCtx_ + b * g_.T * g_.hq + kvHead * g_.group * g_.d;
    const float* key = qkv_ + b * g_.T * g_.Q + g_.hq + kvHead * g_.d;
    const float* value = key + g_.KV * g_.d;
    if (!g_.copyHeads()) return {q, g_.d, g_.Q, dOut, g_.d, g_.hq, key, value, g_.Q};
    std::vector<Operand> rows;
    for (size_t j = 0; j < g_.group; ++j) rows.push_back({q + j * g_.d, g_.Q});
    for (size_t j = 0; j < g_.group; ++j) rows.push_back({dOut + j * g_.d, g_.hq});
    rows.push_back({key, g_.Q});
    rows.push_back({value, g_.Q});
    const float* copies = HeadCopies::of(call_, b, kvHead, g_, rows);
    const size_t block = g_.T * g_.d;
    return {copies,
            block,
            g_.d,
            copies + g_.group * block,
            block,
            g_.d,
            copies + 2 * g_.group * block,
            copies + (2 * g_.group + 1) * block,
            g_.d};
  }

  // Gradient blocks to dqkv: dq of `head`, or dk and dv of `kvHead`.
  void writeQueries(const GradRows& grads, size_t i, size_t b, size_t head, size_t first,
                    size_t rows) const {
    grads.write(i, dqkv_ + b * g_.T * g_.Q, g_.Q, first, head * g_.d, rows);
  }
  void writeKeysValues(const GradRows& grads, size_t i, size_t b, size_t kvHead, size_t first,
                       size_t rows) const {
    grads.write(i, dqkv_ + b * g_.T * g_.Q, g_.Q, first, g_.hq + kvHead * g_.d, rows);
    grads.write(i + 1, dqkv_ + b * g_.T * g_.Q, g_.Q, first, g_.hq + (g_.KV + kvHead) * g_.d, rows);
  }

  // Tile (r, c) of (b, group member j of kvHead): dS into the tile's dS buffer, then what `want`
  // asks added into `out`: dK and dV of key tile c, dQ of query tile r.
  enum Want { kKeysValues = 1, kQueries = 2 };
  void tile(const HeadOperands& in, const TileGrads& out, size_t b, size_t kvHead, size_t j,
            size_t r, size_t c, int want) const {
    const size_t head = kvHead * g_.group + j, d = g_.d;
    const size_t r0 = g_.r0(r), rows = g_.r1(r) - r0, c0 = g_.c0(c), cols = g_.cols(r, c);
    const float* q = in.q + j * in.qStep + r0 * in.qLd;
    const float* dOut = in.dOut + j * in.dOutStep + r0 * in.dOutLd;
    const float* key = in.key + c0 * in.kvLd;
    const float* value = in.value + c0 * in.kvLd;
    const size_t tileSize = g_.bq * g_.bk;
    float* p = scratch(3 * tileSize);
    float* dS = p + tileSize;
    float* dropped = dS + tileSize;
    const float* rowMax = stats_ + (b * g_.H + head) * 2 * g_.T + r0;
    matmul(false, true, rows, cols, d, g_.scale, q, in.qLd, key, in.kvLd, 0.0f, p, g_.bk);
    k_.attentionTileProbs(p, g_.bk, rows, cols, r0, c0, g_.window, rowMax, rowMax + g_.T);
    matmul(false, true, rows, cols, d, 1.0f, dOut, in.dOutLd, value, in.kvLd, 0.0f, dS, g_.bk);
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
    if (want & kKeysValues) {
      const size_t at = (c0 - out.kvFirst) * d;
      matmul(true, false, cols, d, rows, 1.0f, used, g_.bk, dOut, in.dOutLd, 1.0f, out.dv + at, d);
      matmul(true, false, cols, d, rows, g_.scale, dS, g_.bk, q, in.qLd, 1.0f, out.dk + at, d);
    }
    if (want & kQueries)
      matmul(false, false, rows, d, cols, g_.scale, dS, g_.bk, key, in.kvLd, 1.0f,
             out.dq + (r0 - out.dqFirst) * d, d);
  }

 private:
  const TransformerKernels& k_;
  const Grid g_;
  const uint64_t call_;
  const float* qkv_;
  const float* stats_;
  const float* dCtx_;
  float* dqkv_;
  const AttentionDropout* dropout_;
  std::vector<float> rowDot_;
};

// One task per (sample, key/value head): each key tile's dK and dV, and every query tile's dQ
// as the key tiles go by.
void fusedBackward(const Backward& bw, size_t samples) {
  const Grid& g = bw.grid();
  parallelFor(samples * g.KV, [&](size_t task) {
    const size_t b = task / g.KV, kvHead = task % g.KV;
    const HeadOperands in = bw.operands(b, kvHead);
    const GradRows grads(g.group + 2, g.T, g.d);  // dq of each query head, dk, dv
    for (size_t c = 0; c < g.keyTiles; ++c)
      for (size_t j = 0; j < g.group; ++j) {
        const TileGrads out{grads.slot(j), 0, grads.slot(g.group), grads.slot(g.group + 1), 0};
        for (size_t r = g.firstQueryTile(c); r <= g.lastQueryTile(c); ++r)
          bw.tile(in, out, b, kvHead, j, r, c, Backward::kKeysValues | Backward::kQueries);
      }
    for (size_t j = 0; j < g.group; ++j) bw.writeQueries(grads, j, b, kvHead * g.group + j, 0, g.T);
    bw.writeKeysValues(grads, g.group, b, kvHead, 0, g.T);
  });
}

void splitBackward(const Backward& bw, size_t samples) {
  const Grid& g = bw.grid();
  parallelFor(samples * g.KV * g.keyTiles, [&](size_t task) {
    const size_t c = task % g.keyTiles, kvHead = task / g.keyTiles % g.KV,
                 b = task / g.keyTiles / g.KV;
    const HeadOperands in = bw.operands(b, kvHead);
    const GradRows grads(2, g.bk, g.d);  // dk, dv of key tile c
    const TileGrads out{nullptr, 0, grads.slot(0), grads.slot(1), g.c0(c)};
    for (size_t j = 0; j < g.group; ++j)
      for (size_t r = g.firstQueryTile(c); r <= g.lastQueryTile(c); ++r)
        bw.tile(in, out, b, kvHead, j, r, c, Backward::kKeysValues);
    bw.writeKeysValues(grads, 0, b, kvHead, g.c0(c), g.c1(c) - g.c0(c));
  });
  parallelFor(samples * g.H * g.queryTiles, [&](size_t task) {
    const size_t r = task % g.queryTiles, head = task / g.queryTiles % g.H,
                 b = task / g.queryTiles / g.H, kvHead = head / g.group;
    const HeadOperands in = bw.operands(b, kvHead);
    const GradRows grads(1, g.bq, g.d);  // dq of query tile r
    const TileGrads out{grads.slot(0), g.r0(r), nullptr, nullptr, 0};
    for (size_t c = g.firstKeyTile(r); c <= g.lastKeyTile(r); ++c)
      bw.tile(in, out, b, kvHead, head % g.group, r, c, Backward::kQueries);
    bw.writeQueries(grads, 0, b, head, g.r0(r), g.r1(r) - g.r0(r));
  });
}

}  // namespace

void flashAttentionBackward(const TransformerKernels& k, const AttentionShape& s, const float* qkv,
                            const float* ctx, const float* stats, const float* dCtx, float* dqkv,
                            const AttentionDropout* dropout) {
  const Backward bw(k, s, qkv, ctx, stats, dCtx, dqkv, dropout);
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
