// The GPT block's attention core alone (runtime/model/causal_attention.h), forward and backward,
// at each query-row block size against one block of the whole sequence (the full [T, T]
// products): the measurement behind kAttentionBlock. Sizes are interleaved repetition by
// repetition and the fastest of each kept, so a busy machine's drift is shared by all of them.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_cli.h"
#include "common/guarded_main.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/transformer_kernels.h"
#include "runtime/model/causal_attention.h"

namespace {

using ds::runtime::gpt::AttentionShape;
using Clock = std::chrono::steady_clock;

struct Options {
  std::vector<int> threads{1, 2};
  std::vector<int> blocks{32, 64, 128, 256};
  int seq = 1024, heads = 12, headDim = 64, batch = 1, reps = 5;
};

double seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

int run(const Options& o) {
  const auto& k = ds::kernels::transformerKernels();
  const size_t T = static_cast<size_t>(o.seq), H = static_cast<size_t>(o.heads),
               d = static_cast<size_t>(o.headDim), B = static_cast<size_t>(o.batch);
  AttentionShape s{B, T, H, H, d, T};
  std::mt19937_64 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> qkv(B * T * s.qkvStride()), dCtx(B * T * s.ctxStride());
  for (float& x : qkv) x = normal(rng);
  for (float& x : dCtx) x = normal(rng);
  std::vector<float> probs(B * H * T * T), dProbs(probs.size()), ctx(dCtx.size()), dqkv(qkv.size());
  std::vector<size_t> sizes{T};  // first: one block, the full products
  for (int b : o.blocks)
    if (static_cast<size_t>(b) < T) sizes.push_back(static_cast<size_t>(b));
  std::printf("attention core: batch %zu, seq %zu, %zu heads of %zu, %s\n", B, T, H, d,
              ds::kernels::matmulLibrary());
  for (int threads : o.threads) {
    ds::kernels::setMatmulThreads(threads);
    const double inf = std::numeric_limits<double>::infinity();
    std::vector<double> forward(sizes.size(), inf), backward(sizes.size(), inf);
    for (int rep = 0; rep < o.reps; ++rep)
      for (size_t i = 0; i < sizes.size(); ++i) {
        s.block = sizes[i];
        Clock::time_point start = Clock::now();
        ds::runtime::gpt::attentionProbs(k, s, qkv.data(), probs.data(), ctx.data());
        forward[i] = std::min(forward[i], seconds(start));
        start = Clock::now();
        ds::runtime::gpt::attentionBackwardValues(s, qkv.data(), probs.data(), dCtx.data(),
                                                  dProbs.data(), dqkv.data());
        ds::runtime::gpt::attentionBackwardScores(k, s, qkv.data(), probs.data(), dProbs.data(),
                                                  dqkv.data());
        backward[i] = std::min(backward[i], seconds(start));
      }
    std::printf("%d thread%s, fastest of %d:\n  %-10s %12s %12s %12s %8s\n", threads,
                threads > 1 ? "s" : "", o.reps, "block", "forward ms", "backward ms", "total ms",
                "vs full");
    for (size_t i = 0; i < sizes.size(); ++i) {
      const double total = forward[i] + backward[i], full = forward[0] + backward[0];
      std::printf("  %-10s %12.2f %12.2f %12.2f %7.2fx\n",
                  i == 0 ? "full" : std::to_string(sizes[i]).c_str(), 1e3 * forward[i],
                  1e3 * backward[i], 1e3 * total, full / total);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return ds::guardedMain("bench_attention", [&] {
    Options o;
    CLI::App app{"bench_attention: causal attention by query-row blocks against the full products"};
    ds::bench::showDefaults(app);
    app.add_option("--threads", o.threads, "thread counts")->delimiter(',');
    app.add_option("--blocks", o.blocks, "query-row block sizes")->delimiter(',');
    app.add_option("--seq", o.seq, "sequence length")->check(CLI::Range(1, 65536));
    app.add_option("--heads", o.heads, "attention heads")->check(CLI::Range(1, 1024));
    app.add_option("--head-dim", o.headDim, "head size")->check(CLI::Range(1, 1024));
    app.add_option("--batch", o.batch, "samples")->check(CLI::Range(1, 65536));
    app.add_option("--reps", o.reps, "repetitions (the fastest counts)")
        ->check(CLI::Range(1, 1000));
    if (auto status = ds::parseCommandLine(app, argc, argv)) return *status;
    return run(o);
  });
}
