// Causal attention alone, forward and backward: flash attention (kernels/cpu/flash_attention.h) at
// its default tiles and at each key-tile width asked for, against the attention that stores
// [T, T] (per head: the whole score matrix, its softmax, P * V, and the backward's products over
// it), written out here as the baseline measured in the same run. Variants are interleaved
// repetition by repetition and the fastest of each kept, so a busy machine's drift is shared.
// Memory: the bytes each keeps for the backward per layer (probabilities, or two floats per row).
// --json: the figures per (seq, threads): flash's time and useful GFLOPS, the sgemm peak and
// PyTorch's best attention measured in the same run, and the run's peak RSS.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_cli.h"
#include "common/guarded_main.h"
#include "common/json_line.h"
#include "common/process_memory.h"
#include "common/command_output.h"
#include "kernels/cpu/flash_attention.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_peak.h"
#include "kernels/cpu/parallel_for.h"
#include "kernels/cpu/transformer_kernels.h"

namespace {

using ds::kernels::AttentionShape;
using ds::kernels::matmul;
using Clock = std::chrono::steady_clock;

struct Options {
  std::vector<int> threads{1, 2};
  std::vector<int> keyBlocks{64, 128, 256, 512};
  std::vector<int> seqs{1024};
  int heads = 12, headDim = 64, batch = 1, reps = 5, queryBlock = 0;
  bool stored = true, json = false, torch = true;
  std::string python = "/usr/bin/python3";  // the interpreter whose torch is the baseline
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

// One sequence length's inputs and outputs, O(T) each.
struct Arrays {
  std::vector<float> qkv, dCtx, ctx, dqkv, stats;
  explicit Arrays(const AttentionShape& s) {
    std::mt19937_64 rng(1);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    qkv.resize(s.samples * s.seq * s.qkvStride());
    dCtx.resize(s.samples * s.seq * s.ctxStride());
    for (float& x : qkv) x = normal(rng);
    for (float& x : dCtx) x = normal(rng);
    ctx.resize(dCtx.size());
    dqkv.resize(qkv.size());
    stats.resize(s.statsSize());
  }
};

// Causal attention's useful flops: QK^T and PV over the T (T + 1) / 2 visible pairs forward,
// twice as many products backward (flash recomputes QK^T and dO V^T on top).
double usefulFlops(const AttentionShape& s) {
  const double pairs = static_cast<double>(s.seq) * (s.seq + 1) / 2 * s.samples * s.heads;
  return 2.0 * pairs * s.headDim * 2 * 3;
}

void flashPass(const ds::kernels::TransformerKernels& k, const AttentionShape& s, Arrays& a,
               Variant& v) {
  Clock::time_point start = Clock::now();
  ds::kernels::flashAttentionForward(k, s, a.qkv.data(), a.ctx.data(), a.stats.data(), nullptr);
  v.forward = std::min(v.forward, seconds(start));
  start = Clock::now();
  ds::kernels::flashAttentionBackward(k, s, a.qkv.data(), a.ctx.data(), a.stats.data(),
                                      a.dCtx.data(), a.dqkv.data(), nullptr);
  v.backward = std::min(v.backward, seconds(start));
}

double availableBytes() {
  return static_cast<double>(sysconf(_SC_AVPHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE));
}

// The table at one sequence length: the stored baseline (where its [T, T] tensors fit in half the
// memory available) and flash at each key tile, interleaved repetition by repetition.
void table(const Options& o, AttentionShape s) {
  const auto& k = ds::kernels::transformerKernels();
  Arrays a(s);
  const double storedBytes =
      2.0 * s.samples * s.heads * static_cast<double>(s.seq) * s.seq * sizeof(float);
  const bool storedRuns = o.stored && storedBytes < availableBytes() / 2;
  std::vector<Variant> variants;
  if (storedRuns) variants.push_back({"stored [T,T]", 0});
  const size_t defaultKeys = ds::kernels::attentionTiles(s).keyBlock;
  variants.push_back({"flash " + std::to_string(defaultKeys) + " (default)", defaultKeys});
  for (int kb : o.keyBlocks)
    if (static_cast<size_t>(kb) != defaultKeys)
      variants.push_back({"flash " + std::to_string(kb), static_cast<size_t>(kb)});
  std::optional<StoredAttention> stored;
  if (storedRuns) stored.emplace(k, s);
  std::printf("causal attention: batch %zu, seq %zu, %zu heads of %zu, %s, %s L2, query tiles %zu\n",
              s.samples, s.seq, s.heads, s.headDim, ds::kernels::matmulLibrary(),
              megabytes(static_cast<double>(sysconf(_SC_LEVEL2_CACHE_SIZE))).c_str(),
              ds::kernels::attentionTiles(s).queryBlock);
  std::printf("kept for the backward: stored [T,T] %s (probabilities%s), flash %s (2 floats a row)\n",
              megabytes(storedBytes / 2).c_str(), storedRuns ? "" : "; not run: too large here",
              megabytes(static_cast<double>(a.stats.size()) * sizeof(float)).c_str());
  for (int threads : o.threads) {
    ds::kernels::setMatmulThreads(threads);
    for (Variant& v : variants) v.forward = v.backward = std::numeric_limits<double>::infinity();
    for (int rep = 0; rep < o.reps; ++rep)
      for (Variant& v : variants) {
        s.tiling.keyBlock = v.keyBlock;
        if (v.keyBlock) {
          flashPass(k, s, a, v);
          continue;
        }
        Clock::time_point start = Clock::now();
        stored->forward(a.qkv.data(), a.ctx.data());
        v.forward = std::min(v.forward, seconds(start));
        start = Clock::now();
        stored->backward(a.qkv.data(), a.dCtx.data(), a.dqkv.data());
        v.backward = std::min(v.backward, seconds(start));
      }
    std::printf("%d thread%s, fastest of %d:\n  %-18s %11s %12s %10s %8s %9s\n", threads,
                threads > 1 ? "s" : "", o.reps, "", "forward ms", "backward ms", "total ms",
                "GFLOPS", "vs first");
    const double first = variants[0].forward + variants[0].backward;
    for (const Variant& v : variants) {
      const double total = v.forward + v.backward;
      std::printf("  %-18s %11.2f %12.2f %10.2f %8.1f %8.2fx\n", v.name.c_str(), 1e3 * v.forward,
                  1e3 * v.backward, 1e3 * total, usefulFlops(s) / total / 1e9, first / total);
    }
  }
}

// PyTorch's best attention at this shape (bench/gpt/torch_attention_bench.py), fastest of `reps`;
// null where it cannot run (no torch, or its [T, T] tensors do not fit).
nlohmann::json torchSeconds(const Options& o, const AttentionShape& s, int threads, int reps) {
  const std::string cmd = "OMP_NUM_THREADS=" + std::to_string(threads) + " " + o.python +
                          " " DS_SOURCE_DIR "/bench/gpt/torch_attention_bench.py " +
                          std::to_string(s.seq) + " " + std::to_string(s.heads) + " " +
                          std::to_string(s.headDim) + " " + std::to_string(s.samples) + " " +
                          std::to_string(threads) + " " + std::to_string(reps) + " 2>/dev/null";
  const std::optional<std::string> out = ds::commandOutput(cmd);
  const auto j = out ? nlohmann::json::parse(*out, nullptr, false) : nlohmann::json();
  if (j.is_discarded() || !j.contains("seconds") || j["seconds"].is_null()) return nullptr;
  return ds::rounded(j["seconds"].get<double>(), 4);
}

// --json: one line per (seq, threads), flash at its default tiles; the peak RSS of that run alone.
void jsonLines(const Options& o, AttentionShape s) {
  const auto& k = ds::kernels::transformerKernels();
  // Repetitions shrink with T^2 past seq 1024: a pass at 16384 takes seconds.
  const double scale = std::min(1.0, std::pow(1024.0 / static_cast<double>(s.seq), 2));
  const int reps = std::max(1, static_cast<int>(std::lround(o.reps * scale)));
  for (int threads : o.threads) {
    ds::kernels::setMatmulThreads(threads);
    ds::resetPeakRss();
    Variant v{"flash", 0};
    std::optional<Arrays> a;
    a.emplace(s);
    for (int rep = 0; rep < reps; ++rep) flashPass(k, s, *a, v);
    const double peakRss = static_cast<double>(ds::processMemory().peakRssBytes);
    a.reset();
    const double total = v.forward + v.backward;
    ds::printJsonLine({{"seq", s.seq},
                       {"threads", threads},
                       {"seconds", ds::rounded(total, 4)},
                       {"gflops", ds::rounded(usefulFlops(s) / total / 1e9, 1)},
                       {"sgemm_peak_gflops", ds::rounded(ds::kernels::sgemmPeakGflops(threads), 1)},
                       {"torch_seconds", o.torch ? torchSeconds(o, s, threads, reps) : nullptr},
                       {"peak_rss_bytes", peakRss},
                       {"heads", s.heads},
                       {"head_dim", s.headDim},
                       {"batch", s.samples},
                       {"key_tile", ds::kernels::attentionTiles(s).keyBlock},
                       {"isa", ds::kernels::kernelIsaName(ds::kernels::bestKernelIsa())}});
  }
}

int run(const Options& o) {
  for (int seq : o.seqs) {
    AttentionShape s{static_cast<size_t>(o.batch), static_cast<size_t>(seq),
                     static_cast<size_t>(o.heads), static_cast<size_t>(o.heads),
                     static_cast<size_t>(o.headDim), static_cast<size_t>(seq)};
    s.tiling.queryBlock = static_cast<size_t>(o.queryBlock);
    if (o.json)
      jsonLines(o, s);
    else
      table(o, s);
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
    app.add_option("--seqs,--seq", o.seqs, "sequence lengths")
        ->delimiter(',')
        ->check(CLI::Range(1, 1 << 20));
    app.add_option("--heads", o.heads, "attention heads")->check(CLI::Range(1, 1024));
    app.add_option("--head-dim", o.headDim, "head size")->check(CLI::Range(1, 1024));
    app.add_option("--batch", o.batch, "samples")->check(CLI::Range(1, 65536));
    app.add_option("--reps", o.reps, "repetitions (the fastest counts)")
        ->check(CLI::Range(1, 1000));
    app.add_flag("--json", o.json,
                 "one JSON line per (seq, threads): flash at its default tiles, the sgemm peak, "
                 "PyTorch's attention and the run's peak RSS");
    app.add_flag("!--no-torch", o.torch, "skip the PyTorch baseline (--json)");
    app.add_option("--python", o.python, "the Python interpreter that runs the PyTorch baseline");
    app.add_flag("!--no-stored", o.stored,
                 "skip the [T, T] baseline (its probabilities need batch x heads x seq^2 floats)");
    if (auto status = ds::parseCommandLine(app, argc, argv)) return *status;
    return run(o);
  });
}
