// A mixture-of-experts layer (runtime/model/moe_layer.h) beside the dense MLP with the same
// multiply-adds per token, forward and backward on the same tokens, interleaved repetition by
// repetition (the fastest of each kept): the experts' rate against the dense MLP's, both against
// the sgemm peak of the same run. The MoE layer's routing is DeepSpeed's gating without dropping
// (every choice computed), the dense MLP one expert of k x the expert width that all tokens go to.
// --skew concentrates the router's weights so that experts receive uneven token counts.
// Then the whole GPT: the demo's model with a MoE layer in every block against the same model
// with a dense MLP k x as wide (the same multiply-adds per token), tokens/s through the engine on
// one rank, the two interleaved step by step. Last, expert parallelism's traffic: the layer on
// ep ranks (threads over shared memory) through the comms logger, the all_to_all bytes of one
// forward and backward against the rows that must move.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_cli.h"
#include "bench/bench_training.h"
#include "common/guarded_main.h"
#include "common/json_line.h"
#include "kernels/accelerator.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_peak.h"
#include "runtime/comm/comms_logger.h"
#include "runtime/comm/shm_communicator.h"
#include "runtime/config/ds_config.h"
#include "runtime/engine/engine.h"
#include "runtime/model/gpt.h"
#include "runtime/model/moe_layer.h"

namespace {

using namespace ds::runtime;
using ds::runtime::gpt::MoeLayer;
using ds::runtime::gpt::MoeTensors;
using Clock = std::chrono::steady_clock;

struct Options {
  std::vector<int> threads{1, 2};
  int tokens = 2048, hidden = 256, experts = 8, topK = 2, ffn = 0, reps = 5;
  double skew = 0.0;
  bool json = false;
  int steps = 6;  // the GPT's timed steps (0: skip it)
  std::vector<int> expertParallel{2, 4};  // ep sizes whose traffic is counted
};

// The demo's GPT (4 x 256, seq 128, batch 8, vocab 257) with MoE layers of `experts` experts of
// 4 x hidden, or (experts 1) dense with a k x 4 x hidden MLP.
GptConfig gptConfig(const Options& o, bool moe) {
  GptConfig c;
  c.numLayers = 4;
  c.hiddenSize = 256;
  c.numAttentionHeads = 4;
  c.seqLength = 128;
  c.maxPositionEmbeddings = 128;
  c.posEmb = PositionEmbedding::Rotary;
  if (moe) {
    c.moe.numExperts = o.experts;
    c.moe.topK = o.topK;
    c.moe.kind = MoeKind::DeepSpeed;
    c.moe.useResidual = false;
  } else {
    c.intermediateSize = o.topK * 4 * c.hiddenSize;
  }
  return c;
}

// Seconds of each timed step of both models, alternated.
std::pair<double, double> gptSeconds(const Options& o, int threads) {
  setenv("OMP_NUM_THREADS", std::to_string(threads).c_str(), 1);  // CPU-Adam's pool
  ds::kernels::setMatmulThreads(threads);
  const DeepSpeedConfig config = parseDeepSpeedConfig(
      R"({"train_micro_batch_size_per_gpu": 8, "optimizer": {"type": "AdamW", "params": {"lr": 0.001}}})",
      1, "bench_moe");
  Gpt moeModel(gptConfig(o, true)), denseModel(gptConfig(o, false));
  auto moeGroup = ShmCommunicator::inProcessGroup(1),
       denseGroup = ShmCommunicator::inProcessGroup(1);
  Engine moeEngine(moeModel, config, moeGroup[0], 1),
      denseEngine(denseModel, config, denseGroup[0], 1);
  Batch batch;
  batch.size = 8;
  uint64_t v = 1;
  for (int i = 0; i < 8 * 128; ++i) {
    v = v * 6364136223846793005ULL + 1442695040888963407ULL;
    batch.inputIds.push_back(static_cast<int32_t>((v >> 33) % 257));
    batch.targetIds.push_back(static_cast<int32_t>((v >> 17) % 257));
  }
  for (uint64_t i = 0; i < 8; ++i) batch.sampleIds.push_back(i);
  double moe = 0.0, dense = 0.0;
  for (int s = 0; s < o.steps + 1; ++s) {  // step 0 warms up
    ds::bench::StepProbe probeMoe, probeDense;
    probeMoe.afterStep = [&](const ds::bench::StepTiming& t) {
      if (s > 0) moe += t.seconds;
    };
    probeDense.afterStep = [&](const ds::bench::StepTiming& t) {
      if (s > 0) dense += t.seconds;
    };
    ds::bench::trainSteps(moeEngine, moeGroup[0], batch, s + 1, probeMoe);
    ds::bench::trainSteps(denseEngine, denseGroup[0], batch, s + 1, probeDense);
  }
  return {moe / o.steps, dense / o.steps};
}

// A layer's parameters and gradients, its config and scratch.
struct Layer {
  GptConfig config;
  std::vector<float> params, grads;
  MoeTensors<const float> p;
  MoeTensors<float> g;
  gpt::MoeActivations acts;
  gpt::MoeWorkspace work;

  Layer(const Options& o, int experts, int k, int ffn, uint64_t seed) {
    config.hiddenSize = o.hidden;
    config.numAttentionHeads = 1;
    config.intermediateSize = ffn;
    config.moe.numExperts = experts;
    config.moe.topK = k;
    config.moe.kind = MoeKind::DeepSpeed;
    config.moe.tokenDropping = false;
    config.moe.useResidual = false;
    const size_t h = static_cast<size_t>(o.hidden), f = static_cast<size_t>(ffn);
    const size_t E = static_cast<size_t>(experts), expert = 2 * h * f + f + h;
    params.resize(E * h + E * expert);
    grads.assign(params.size(), 0.0f);
    std::mt19937 rng(static_cast<unsigned>(seed));
    std::normal_distribution<float> normal(0.0f, 0.05f);
    for (float& v : params) v = normal(rng);
    // --skew: expert e's router row scaled up with e, so the later experts draw more tokens.
    for (size_t e = 0; e < E; ++e)
      for (size_t i = 0; i < h; ++i)
        params[e * h + i] *= static_cast<float>(1.0 + o.skew * static_cast<double>(e));
    p.router = params.data();
    g.router = grads.data();
    for (size_t e = 0; e < E; ++e) {
      const size_t at = E * h + e * expert;
      p.experts.push_back(
          {&params[at], &params[at + f * h], &params[at + f * h + f], &params[at + 2 * f * h + f]});
      g.experts.push_back(
          {&grads[at], &grads[at + f * h], &grads[at + f * h + f], &grads[at + 2 * f * h + f]});
    }
  }
};

double seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// Forward and backward of `layer` on x; returns seconds.
double step(Layer& layer, const MoeLayer& moe, const std::vector<float>& x,
            const std::vector<float>& dOut, std::vector<float>& out, std::vector<float>& dx,
            size_t N) {
  const Clock::time_point start = Clock::now();
  layer.acts.stats = moe.forward(layer.p, x.data(), N, layer.acts, layer.work, out.data(), nullptr);
  moe.backward(layer.p, layer.g, x.data(), N, layer.acts, layer.work, dOut.data(), dx.data(), 0.0);
  return seconds(start);
}

// Expert parallelism's all-to-all traffic on rank 0 of `ep` ranks, each with o.tokens rows of its
// own, in one forward and backward: what the comms logger records (every all_to_all's message,
// as DeepSpeed's all_to_all_single logs it: ep chunks of the group's largest, padding included,
// and the row counts) against the rows that must move (each of the 4 exchanges carries every kept
// choice's row once: tokens x k x h floats, (ep - 1) / ep of them to other ranks).
struct Traffic {
  double logged = 0, rows = 0;
};
Traffic expertTraffic(const Options& o, int ep) {
  const int ffn = o.ffn > 0 ? o.ffn : 4 * o.hidden;
  const size_t N = static_cast<size_t>(o.tokens), h = static_cast<size_t>(o.hidden);
  auto group = ShmCommunicator::inProcessGroup(ep);
  CommsLoggerConfig config;
  config.enabled = true;
  CommsLogger logger(config);
  std::vector<std::thread> ranks;
  for (int r = 0; r < ep; ++r)
    ranks.emplace_back([&, r] {
      Layer layer(o, o.experts, o.topK, ffn, 1);  // the same router and experts on every rank
      // Rank r holds experts [r E / ep, (r + 1) E / ep).
      const auto held = static_cast<std::ptrdiff_t>(o.experts / ep);
      auto keepOwn = [&](auto& experts) {
        experts = {experts.begin() + r * held, experts.begin() + (r + 1) * held};
      };
      keepOwn(layer.p.experts);
      keepOwn(layer.g.experts);
      ds::kernels::Accelerator& acc = ds::kernels::accelerator(ds::DeviceKind::Cpu);
      const MoeLayer moe(layer.config, acc);
      std::vector<float> x(N * h), dOut(N * h), out(N * h), dx(N * h);
      std::mt19937 rng(static_cast<unsigned>(10 + r));  // each rank its own tokens
      std::normal_distribution<float> normal(0.0f, 1.0f);
      for (float& v : x) v = normal(rng);
      for (float& v : dOut) v = normal(rng);
      if (r == 0) {  // only rank 0's ops go to the logger
        LoggingCommunicator logged(group[0], logger);
        layer.acts.stats =
            moe.forward(layer.p, x.data(), N, layer.acts, layer.work, out.data(), nullptr, &logged);
        moe.backward(layer.p, layer.g, x.data(), N, layer.acts, layer.work, dOut.data(), dx.data(),
                     0.0, &logged);
      } else {
        layer.acts.stats = moe.forward(layer.p, x.data(), N, layer.acts, layer.work, out.data(),
                                       nullptr, &group[static_cast<size_t>(r)]);
        moe.backward(layer.p, layer.g, x.data(), N, layer.acts, layer.work, dOut.data(), dx.data(),
                     0.0, &group[static_cast<size_t>(r)]);
      }
    });
  for (std::thread& t : ranks) t.join();
  Traffic traffic;
  traffic.logged = static_cast<double>(logger.bytes(ds::CollectiveOp::AllToAll));
  traffic.rows = 4.0 * static_cast<double>(N) * o.topK * static_cast<double>(h) * sizeof(float);
  return traffic;
}

int run(const Options& o) {
  const int ffn = o.ffn > 0 ? o.ffn : 4 * o.hidden;
  const size_t N = static_cast<size_t>(o.tokens), h = static_cast<size_t>(o.hidden);
  Layer moeLayer(o, o.experts, o.topK, ffn, 1);
  Layer denseLayer(o, 1, 1, o.topK * ffn, 2);
  ds::kernels::Accelerator& acc = ds::kernels::accelerator(ds::DeviceKind::Cpu);
  const MoeLayer moe(moeLayer.config, acc), dense(denseLayer.config, acc);
  std::vector<float> x(N * h), dOut(N * h), out(N * h), dx(N * h);
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& v : x) v = normal(rng);
  for (float& v : dOut) v = normal(rng);
  // 6 x the multiply-adds of k experts of [ffn, h] and [h, ffn] per token.
  const double flops = 6.0 * static_cast<double>(N) * o.topK * 2.0 * o.hidden * ffn;
  if (!o.json)
    std::printf(
        "MoE layer: %d tokens, hidden %d, %d experts of width %d, top-%d; dense MLP of "
        "width %d; %s\n",
        o.tokens, o.hidden, o.experts, ffn, o.topK, o.topK * ffn, ds::kernels::matmulLibrary());
  for (int threads : o.threads) {
    ds::kernels::setMatmulThreads(threads);
    double moeBest = 1e30, denseBest = 1e30;
    for (int r = 0; r < o.reps + 1; ++r) {  // the first of each warms up
      const double m = step(moeLayer, moe, x, dOut, out, dx, N);
      const double d = step(denseLayer, dense, x, dOut, out, dx, N);
      if (r == 0) continue;
      moeBest = std::min(moeBest, m);
      denseBest = std::min(denseBest, d);
    }
    const double peak = ds::kernels::sgemmPeakGflops(threads);
    const gpt::MoeStatistics& s = moeLayer.acts.stats;
    const double moeGflops = flops / moeBest / 1e9, denseGflops = flops / denseBest / 1e9;
    const auto [moeStep, denseStep] = o.steps > 0 ? gptSeconds(o, threads) : std::pair{0.0, 0.0};
    const double tokens = 8.0 * 128.0;
    if (o.json) {
      ds::printJsonLine(
          {{"threads", threads},
           {"tokens", o.tokens},
           {"experts", o.experts},
           {"top_k", o.topK},
           {"moe_seconds", ds::rounded(moeBest, 5)},
           {"dense_seconds", ds::rounded(denseBest, 5)},
           {"moe_gflops", ds::rounded(moeGflops, 1)},
           {"dense_gflops", ds::rounded(denseGflops, 1)},
           {"moe_over_dense", ds::rounded(moeGflops / denseGflops, 3)},
           {"sgemm_peak_gflops", ds::rounded(peak, 1)},
           {"expert_tokens_min", s.minTokens},
           {"expert_tokens_max", s.maxTokens},
           {"gpt_moe_tokens_per_s", o.steps ? ds::rounded(tokens / moeStep, 0) : 0.0},
           {"gpt_dense_tokens_per_s", o.steps ? ds::rounded(tokens / denseStep, 0) : 0.0}});
      continue;
    }
    std::printf(
        "%d thread%s, fastest of %d: MoE %.2f ms (%.1f GFLOPS), dense %.2f ms (%.1f "
        "GFLOPS): %.0f%% of the dense rate; sgemm peak %.1f GFLOPS; expert tokens "
        "%u-%u\n",
        threads, threads > 1 ? "s" : "", o.reps, moeBest * 1e3, moeGflops, denseBest * 1e3,
        denseGflops, 100.0 * moeGflops / denseGflops, peak, s.minTokens, s.maxTokens);
    if (o.steps > 0)
      std::printf(
          "  the GPT (4 x 256, seq 128, batch 8), a step: MoE %.0f tokens/s, dense %.0f "
          "tokens/s (%.2fx)\n",
          tokens / moeStep, tokens / denseStep, denseStep / moeStep);
  }
  for (int ep : o.expertParallel) {
    if (ep < 2 || o.experts % ep != 0) continue;
    const Traffic t = expertTraffic(o, ep);
    if (o.json) {
      ds::printJsonLine({{"expert_parallel", ep},
                         {"tokens_per_rank", o.tokens},
                         {"a2a_bytes_per_step", t.logged},
                         {"a2a_row_bytes_per_step", t.rows},
                         {"a2a_over_rows", ds::rounded(t.logged / t.rows, 3)}});
      continue;
    }
    std::printf(
        "ep %d, %d tokens a rank: all_to_all %.2f MiB a layer's forward and backward on rank 0, "
        "%.2f MiB of rows to move (%.2fx; %.0f%% of them to other ranks)\n",
        ep, o.tokens, t.logged / 1048576.0, t.rows / 1048576.0, t.logged / t.rows,
        100.0 * (ep - 1) / ep);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return ds::guardedMain("bench_moe", [&] {
    Options o;
    CLI::App app{"bench_moe: a MoE layer's experts against the dense MLP of the same work"};
    ds::bench::showDefaults(app);
    app.add_option("--threads", o.threads, "thread counts")->delimiter(',');
    app.add_option("--tokens", o.tokens, "tokens (rows)")->check(CLI::Range(1, 1 << 22));
    app.add_option("--hidden", o.hidden, "hidden size")->check(CLI::Range(1, 65536));
    app.add_option("--experts", o.experts, "experts")->check(CLI::Range(2, 4096));
    app.add_option("--top-k", o.topK, "experts per token (1 or 2)")->check(CLI::Range(1, 2));
    app.add_option("--ffn", o.ffn, "an expert's width (0: 4 x hidden)")
        ->check(CLI::Range(0, 1 << 20));
    app.add_option("--expert-parallel", o.expertParallel,
                   "ep sizes whose all-to-all traffic is counted (dividing --experts)")
        ->delimiter(',');
    app.add_option("--skew", o.skew, "router rows scaled by 1 + skew x e: uneven experts")
        ->check(CLI::Range(0.0, 100.0));
    app.add_option("--reps", o.reps, "repetitions (the fastest counts)")
        ->check(CLI::Range(1, 1000));
    app.add_option("--steps", o.steps, "the GPT's timed steps (0: the layer alone)")
        ->check(CLI::Range(0, 1000));
    app.add_flag("--json", o.json, "one JSON line per thread count");
    if (auto status = ds::parseCommandLine(app, argc, argv)) return *status;
    return run(o);
  });
}
