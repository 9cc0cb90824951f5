// Causal attention alone, forward and backward: flash attention (kernels/cpu/flash_attention.h) at
// its default tiles and at each key-tile width asked for, against the attention that stores
// [T, T] (per head: the whole score matrix, its softmax, P * V, and the backward's products over
// it), written out here as the baseline measured in the same run. Variants are interleaved
// repetition by repetition and the fastest of each kept, so a busy machine's drift is shared.
// Memory: the bytes each keeps for the backward per layer (probabilities, or two floats per row).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_cli.h"
#include "common/guarded_main.h"
#include "kernels/cpu/flash_attention.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/parallel_for.h"
#include "kernels/cpu/transformer_kernels.h"

namespace {

using ds::kernels::AttentionShape;
using ds::kernels::matmul;
using Clock = std::chrono::steady_clock;

struct Options {
  std::vector<int> threads{1, 2};
  std::vector<int> keyBlocks{64, 128, 256, 512};
  int seq = 1024, heads = 12, headDim = 64, batch = 1, reps = 5, queryBlock = 0;
  bool stored = true;
};

double seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// The attention that stores [T, T] (multi-head, no GQA, no window): one task per (sample, head).
struct StoredAttention {
  const ds::kernels::TransformerKernels& k;
  const AttentionShape& s;
  std::vector<float> probs, dProbs;

  StoredAttention(const ds::kernels::TransformerKernels& kernels, const AttentionShape& shape)
      : k(kernels), s(shape), probs(shape.samples * shape.heads * shape.seq * shape.seq),
        dProbs(probs.size()) {}

  void forward(const float* qkv, float* ctx) {
    const size_t T = s.seq, d = s.headDim, Q = s.qkvStride(), hq = s.ctxStride();
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    ds::kernels::parallelFor(s.samples * s.heads, [&](size_t bh) {
      const size_t b = bh / s.heads, head = bh % s.heads;
      const float* q = qkv + b * T * Q + head * d;
      float* p = probs.data() + bh * T * T;
      matmul(false, true, T, T, d, scale, q, Q, q + hq, Q, 0.0f, p, T);
      k.causalSoftmaxForward(p, T, T);
      matmul(false, false, T, d, T, 1.0f, p, T, q + 2 * hq, Q, 0.0f, ctx + b * T * hq + head * d,
             hq);
    });
  }

  void backward(const float* qkv, const float* dCtx, float* dqkv) {
    const size_t T = s.seq, d = s.headDim, Q = s.qkvStride(), hq = s.ctxStride();
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    ds::kernels::parallelFor(s.samples * s.heads, [&](size_t bh) {
      const size_t b = bh / s.heads, head = bh % s.heads, at = b * T * Q + head * d;
      const float* p = probs.data() + bh * T * T;
      float* dS = dProbs.data() + bh * T * T;
      const float* dc = dCtx + b * T * hq + head * d;
      matmul(false, true, T, T, d, 1.0f, dc, hq, qkv + at + 2 * hq, Q, 0.0f, dS, T);
      matmul(true, false, T, d, T, 1.0f, p, T, dc, hq, 0.0f, dqkv + at + 2 * hq, Q);
      k.softmaxBackward(dS, p, T);
      matmul(false, false, T, d, T, scale, dS, T, qkv + at + hq, Q, 0.0f, dqkv + at, Q);
      matmul(true, false, T, d, T, scale, dS, T, qkv + at, Q, 0.0f, dqkv + at + hq, Q);
    });
  }
};

struct Variant {
  std::string name;
  size_t keyBlock;  // 0: the stored [T, T] baseline
  double forward = std::numeric_limits<double>::infinity(), backward = forward;
};

std::string megabytes(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MB", bytes / 1e6);
  return text;
}

int run(const Options& o) {
  const auto& k = ds::kernels::transformerKernels();
  const size_t T = static_cast<size_t>(o.seq), H = static_cast<size_t>(o.heads),
               d = static_cast<size_t>(o.headDim), B = static_cast<size_t>(o.batch);
  AttentionShape s{B, T, H, H, d, T};
  s.tiling.queryBlock = static_cast<size_t>(o.queryBlock);
  std::mt19937_64 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> qkv(B * T * s.qkvStride()), dCtx(B * T * s.ctxStride());
  for (float& x : qkv) x = normal(rng);
  for (float& x : dCtx) x = normal(rng);
  std::vector<float> ctx(dCtx.size()), dqkv(qkv.size()), stats(s.statsSize());
  std::vector<Variant> variants;
  if (o.stored) variants.push_back({"stored [T,T]", 0});
  variants.push_back({"flash " + std::to_string(ds::kernels::attentionTiles(s).keyBlock) +
                          " (default)",
                      ds::kernels::attentionTiles(s).keyBlock});
  for (int kb : o.keyBlocks)
    if (static_cast<size_t>(kb) != variants.back().keyBlock)
      variants.push_back({"flash " + std::to_string(kb), static_cast<size_t>(kb)});
  StoredAttention stored(k, s);
  const double storedBytes = o.stored ? static_cast<double>(stored.probs.size()) * sizeof(float) : 0,
               flashBytes = static_cast<double>(stats.size()) * sizeof(float);
  std::printf("causal attention: batch %zu, seq %zu, %zu heads of %zu, %s, %s L2, query tiles %zu\n",
              B, T, H, d, ds::kernels::matmulLibrary(),
              megabytes(static_cast<double>(sysconf(_SC_LEVEL2_CACHE_SIZE))).c_str(),
              ds::kernels::attentionTiles(s).queryBlock);
  std::printf("kept for the backward: stored [T,T] %s (probabilities), flash %s (2 floats a row)\n",
              o.stored ? megabytes(storedBytes).c_str() : "not run", megabytes(flashBytes).c_str());
  for (int threads : o.threads) {
    ds::kernels::setMatmulThreads(threads);
    for (Variant& v : variants) v.forward = v.backward = std::numeric_limits<double>::infinity();
    for (int rep = 0; rep < o.reps; ++rep)
      for (Variant& v : variants) {
        s.tiling.keyBlock = v.keyBlock;
        Clock::time_point start = Clock::now();
        if (v.keyBlock)
          ds::kernels::flashAttentionForward(k, s, qkv.data(), ctx.data(), stats.data(), nullptr);
        else
          stored.forward(qkv.data(), ctx.data());
        v.forward = std::min(v.forward, seconds(start));
        start = Clock::now();
        if (v.keyBlock)
          ds::kernels::flashAttentionBackward(k, s, qkv.data(), ctx.data(), stats.data(),
                                              dCtx.data(), dqkv.data(), nullptr);
        else
          stored.backward(qkv.data(), dCtx.data(), dqkv.data());
        v.backward = std::min(v.backward, seconds(start));
      }
    // Causal attention's useful flops: QK^T and PV over the T (T + 1) / 2 visible pairs forward,
    // twice as many products backward (flash recomputes QK^T and dO V^T on top).
    const double pairs = static_cast<double>(T) * (T + 1) / 2 * B * H;
    const double flops = 2.0 * pairs * d * 2 * 3;
    std::printf("%d thread%s, fastest of %d:\n  %-18s %11s %12s %10s %8s %9s\n", threads,
                threads > 1 ? "s" : "", o.reps, "", "forward ms", "backward ms", "total ms",
                "GFLOPS", "vs first");
    const double first = variants[0].forward + variants[0].backward;
    for (const Variant& v : variants) {
      const double total = v.forward + v.backward;
      std::printf("  %-18s %11.2f %12.2f %10.2f %8.1f %8.2fx\n", v.name.c_str(), 1e3 * v.forward,
                  1e3 * v.backward, 1e3 * total, flops / total / 1e9, first / total);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return ds::guardedMain("bench_attention", [&] {
    Options o;
    CLI::App app{
        "bench_attention: flash attention against the attention that stores [T, T], same run"};
    ds::bench::showDefaults(app);
    app.add_option("--threads", o.threads, "thread counts")->delimiter(',');
    app.add_option("--key-blocks", o.keyBlocks, "flash key-tile widths besides the default")
        ->delimiter(',');
    app.add_option("--query-block", o.queryBlock, "flash query-tile rows (0: the default)")
        ->check(CLI::Range(0, 4096));
    app.add_option("--seq", o.seq, "sequence length")->check(CLI::Range(1, 1 << 20));
    app.add_option("--heads", o.heads, "attention heads")->check(CLI::Range(1, 1024));
    app.add_option("--head-dim", o.headDim, "head size")->check(CLI::Range(1, 1024));
    app.add_option("--batch", o.batch, "samples")->check(CLI::Range(1, 65536));
    app.add_option("--reps", o.reps, "repetitions (the fastest counts)")
        ->check(CLI::Range(1, 1000));
    app.add_flag("!--no-stored", o.stored,
                 "skip the [T, T] baseline (its probabilities need batch x heads x seq^2 floats)");
    if (auto status = ds::parseCommandLine(app, argc, argv)) return *status;
    return run(o);
  });
}
