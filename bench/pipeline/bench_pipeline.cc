// bench_pipeline: what pipeline and tensor parallelism buy, measured on the real engine.
//   bubble   the idle fraction of a 1F1B step (Engine::trainBatch, ranks as threads) for p stages
//            and m micro-batches, beside DeepSpeed's (p-1)/(m+p-1). Each pass is paced to a fixed
//            cost (bench/pipeline/paced_stage.h) so that the schedule is measured rather than how
//            p threads share this machine's cores; bubble = 1 - mean stage busy time / the step's
//            pass window (first forward start to last backward end, over all stages).
//   memory   the largest rank's model-state bytes at (pipe, model) beside unsliced / (pipe x model).
//   pair     data-parallel 2 against pipe-parallel-size 2 on two bandwidth-limited netns nodes.
// Usage: bench_pipeline [--json] [--parts bubble,memory,pair] [--pace-ms 20] [--steps 3]
//                       [--rate-mbit 100] [--pair-steps 3] [--no-real]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "bench/bench_cli.h"
#include "bench/pipeline/bandwidth_pair.h"
#include "bench/pipeline/paced_stage.h"
#include "bench/pipeline/rank_grid.h"
#include "common/guarded_main.h"
#include "common/json_line.h"
#include "kernels/cpu/matmul.h"
#include "runtime/config/ds_config.h"

namespace {

using namespace ds::runtime;
using ds::bench::PacedStage;

struct Options {
  bool json = false, real = true;
  std::vector<std::string> parts = {"bubble", "memory", "pair"};
  int paceMs = 20, steps = 3, rateMbit = 100, pairSteps = 3;
};

std::string engineJson(int micro, int gas, int zero) {
  return R"({"train_micro_batch_size_per_gpu": )" + std::to_string(micro) +
         R"(, "gradient_accumulation_steps": )" + std::to_string(gas) +
         R"(, "optimizer": {"type": "AdamW", "params": {"lr": 0.001}},
            "zero_optimization": {"stage": )" +
         std::to_string(zero) + "}}";
}

Batch tokens(const GptConfig& c, int micro, uint64_t first) {
  Batch b;
  b.size = static_cast<size_t>(micro);
  uint64_t x = first * 2654435761ULL + 1;
  for (int i = 0; i < micro * c.seqLength; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    b.inputIds.push_back(static_cast<int32_t>((x >> 33) % static_cast<uint64_t>(c.vocabSize)));
    b.targetIds.push_back(static_cast<int32_t>((x >> 17) % static_cast<uint64_t>(c.vocabSize)));
  }
  for (int s = 0; s < micro; ++s) b.sampleIds.push_back(first + static_cast<uint64_t>(s));
  return b;
}

// ---- bubble ---------------------------------------------------------------------------------

GptConfig bubbleGpt() {
  GptConfig c;
  c.numLayers = 8;
  c.hiddenSize = 64;
  c.numAttentionHeads = 4;
  c.seqLength = c.maxPositionEmbeddings = 32;
  c.vocabSize = 256;
  return c;
}

struct Bubble {
  double measured = 0, theory = 0;
  int overruns = 0, passes = 0;
};

// Backward costs twice the forward, as in a transformer; the theory does not depend on the ratio.
Bubble measureBubble(int pipe, int m, int paceMs, int steps) {
  const GptConfig c = bubbleGpt();
  constexpr int kMicro = 2;
  const DeepSpeedConfig ds = parseDeepSpeedConfig(engineJson(kMicro, m, 0), 1, "bench_pipeline");
  std::vector<std::vector<PacedStage::Pass>> passes(static_cast<size_t>(pipe));
  const auto forward = std::chrono::microseconds(paceMs * 1000);
  ds::bench::onGrid(pipe, 1, c, "parameters",
                    "bubble-" + std::to_string(pipe) + "-" + std::to_string(m) + "-" +
                        std::to_string(paceMs),
                    [&](ds::bench::GridRank& r) {
                      PacedStage paced(r.model, forward, 2 * forward);
                      Engine engine(paced, ds, r.data, 1, r.groups);
                      for (int s = -1; s < steps; ++s) {  // step -1 warms up
                        paced.setStep(s);
                        engine.trainBatch([&](int64_t micro) {
                          return tokens(c, kMicro, static_cast<uint64_t>(((s + 1) * m + micro) * kMicro));
                        });
                      }
                      passes[static_cast<size_t>(r.stage)] = paced.passes();
                    });
  Bubble b;
  b.theory = static_cast<double>(pipe - 1) / (m + pipe - 1);
  std::vector<double> perStep;
  for (int s = 0; s < steps; ++s) {
    PacedStage::Clock::time_point first = PacedStage::Clock::time_point::max(),
                                  last = PacedStage::Clock::time_point::min();
    double busy = 0;
    for (const auto& stage : passes)
      for (const PacedStage::Pass& p : stage) {
        if (p.step != s) continue;
        first = std::min(first, p.start);
        last = std::max(last, p.end);
        busy += std::chrono::duration<double>(p.end - p.start).count();
        b.overruns += p.overran ? 1 : 0;
        ++b.passes;
      }
    const double window = std::chrono::duration<double>(last - first).count();
    perStep.push_back(1.0 - busy / pipe / window);
  }
  // The median step: one step that another process on the machine delayed does not count.
  std::sort(perStep.begin(), perStep.end());
  b.measured = perStep[perStep.size() / 2];
  return b;
}

void bubblePart(const Options& o) {
  if (!o.json)
    std::printf(
        "Pipeline bubble: GPT 8 layers x hidden 64, ranks as threads, 1F1B (Engine::trainBatch), "
        "the median of %d steps after a warm-up.\n"
        "paced: every forward pass lasts %d ms and every backward %d ms (the real pass, then a "
        "sleep),\n  so %s cores run p stages without the CPU count entering; the sends and "
        "receives are real.\nreal: unpaced passes (p = 2 only: two threads, two cores; the stages "
        "are unequal,\n  the first holds the embedding and the last the head and loss, and any "
        "other load on the machine counts).\n"
        "bubble = 1 - mean stage busy time / (last backward end - first forward start).\n"
        "%-6s %4s %4s %10s %10s %9s %9s\n",
        o.steps, o.paceMs, 2 * o.paceMs, "this machine's", "compute", "p", "m", "bubble", "theory",
        "off by", "overruns");
  for (bool paced : {true, false}) {
    if (!paced && !o.real) continue;
    for (int p : {2, 4}) {
      if (!paced && p != 2) continue;
      for (int m : {4, 8, 16}) {
        const Bubble b = measureBubble(p, m, paced ? o.paceMs : 0, o.steps);
        const double off = (b.measured - b.theory) / b.theory;
        if (o.json)
          ds::printJsonLine({{"pipe", p},
                             {"micro_batches", m},
                             {"bubble", ds::rounded(b.measured, 4)},
                             {"bubble_theory", ds::rounded(b.theory, 4)},
                             {"compute", paced ? "paced" : "real"},
                             {"pass_overruns", b.overruns}});
        else
          std::printf("%-6s %4d %4d %10.4f %10.4f %8.1f%% %4d/%d\n", paced ? "paced" : "real", p,
                      m, b.measured, b.theory, 100.0 * off, b.overruns, b.passes);
      }
    }
  }
}

// ---- memory ---------------------------------------------------------------------------------

GptConfig memoryGpt() {
  GptConfig c;
  c.numLayers = 8;
  c.hiddenSize = 512;
  c.numAttentionHeads = 8;
  c.seqLength = c.maxPositionEmbeddings = 128;
  c.vocabSize = 256;
  return c;
}

struct Footprint {
  size_t largest = 0;
  int rank = 0, stage = 0;
};

Footprint measureState(int pipe, int model) {
  const GptConfig c = memoryGpt();
  const DeepSpeedConfig ds = parseDeepSpeedConfig(engineJson(2, 2, 1), 1, "bench_pipeline");
  Footprint f;
  std::mutex mutex;
  ds::bench::onGrid(pipe, model, c, "parameters",
                    "memory-" + std::to_string(pipe) + "-" + std::to_string(model),
                    [&](ds::bench::GridRank& r) {
                      Engine engine(r.model, ds, r.data, 1, r.groups);
                      const size_t bytes = engine.memory().modelState();
                      std::lock_guard<std::mutex> lock(mutex);
                      if (bytes > f.largest || (bytes == f.largest && r.rank < f.rank))
                        f = {bytes, r.rank, r.stage};  // ties: the lowest rank, for a stable report
                    });
  return f;
}

void memoryPart(const Options& o) {
  const GptConfig c = memoryGpt();
  const Gpt whole(c);
  if (!o.json)
    std::printf(
        "\nModel-state memory per rank (parameters, gradients, AdamW moments; fp32, ZeRO 1, data "
        "1):\nGPT 8 layers x hidden 512, %zu parameters, stages cut by pipe-partition-method "
        "\"parameters\".\nformula = the unsliced job's model states / (pipe x model); the figure is "
        "the largest rank's:\nthe stages' layer counts balance, but the first stage holds the "
        "embedding and the last a tied\ncopy of it (with the final norm), and model slices "
        "replicate norms and biases.\n%4s %5s %14s %14s %8s %s\n",
        whole.parameterCount(), "pipe", "model", "state bytes", "formula", "ratio", "largest at");
  size_t unsliced = 0;
  for (auto [pipe, model] : std::vector<std::pair<int, int>>{{1, 1}, {2, 1}, {1, 2}, {2, 2}}) {
    const Footprint f = measureState(pipe, model);
    if (pipe == 1 && model == 1) unsliced = f.largest;
    const size_t formula = unsliced / static_cast<size_t>(pipe * model);
    const double ratio = static_cast<double>(f.largest) / static_cast<double>(formula);
    if (o.json)
      ds::printJsonLine({{"pipe", pipe},
                         {"model", model},
                         {"state_bytes", f.largest},
                         {"formula_bytes", formula},
                         {"ratio", ds::rounded(ratio, 4)},
                         {"rank", f.rank},
                         {"stage", f.stage}});
    else
      std::printf("%4d %5d %14zu %14zu %8.4f rank %d (stage %d)\n", pipe, model, f.largest,
                  formula, ratio, f.rank, f.stage);
  }
}

// ---- bandwidth-limited pair -----------------------------------------------------------------

bool pairPart(const Options& o, const std::string& binDir) {
  ds::bench::PairOptions p;
  p.rateMbit = o.rateMbit;
  p.steps = o.pairSteps;
  p.binDir = binDir;
  if (!o.json)
    std::printf(
        "\nBandwidth-limited pair: 2 netns nodes, tbf %d Mbit/s per link, GPT %d layers x hidden "
        "%d, seq %d,\n%d x %d samples per step (ZeRO 1, fp32), through ds-launch --launcher netns; "
        "step seconds from the\ntrainer's iteration lines (tokens per step / its tokens/s), mean "
        "after the first.\n",
        p.rateMbit, p.layers, p.hidden, p.seq, 2 * p.microBatches, p.micro);
  const ds::bench::PairResult r = ds::bench::runBandwidthPair(p);
  if (!r.skipped.empty()) {
    if (o.json)
      ds::printJsonLine({{"pair", "skipped"}, {"reason", r.skipped}});
    else
      std::printf("skipped: %s\n", r.skipped.c_str());
    return false;
  }
  for (const ds::bench::PairJob& j : r.jobs) {
    if (o.json) {
      ds::JsonLine steps = ds::JsonLine::array();
      for (double s : j.stepSeconds) steps.push_back(ds::rounded(s, 3));
      ds::printJsonLine({{"pair_job", j.name},
                         {"pipe", j.pipe},
                         {"data", j.data},
                         {"rate_mbit", p.rateMbit},
                         {"step_seconds", steps},
                         {"mean_step_seconds", ds::rounded(j.meanSeconds, 3)}});
    } else {
      std::printf("%-22s steps:", j.name.c_str());
      for (double s : j.stepSeconds) std::printf(" %.3f", s);
      std::printf("  mean %.3f s\n", j.meanSeconds);
    }
  }
  const double ratio = r.jobs[1].meanSeconds / r.jobs[0].meanSeconds;
  if (o.json)
    ds::printJsonLine({{"pipe_over_data_step_time", ds::rounded(ratio, 3)}});
  else
    std::printf("pipeline / data-parallel step time: %.3f (%s)\n", ratio,
                ratio < 1 ? "the pipeline is faster" : "the pipeline is NOT faster");
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  return ds::guardedMain("bench_pipeline", [&] {
    Options o;
    CLI::App app{
        "bench_pipeline: the 1F1B pipeline bubble against (p-1)/(m+p-1), per-rank model-state "
        "memory against 1/(pipe x model), and pipe 2 against data 2 on bandwidth-limited nodes"};
    ds::bench::showDefaults(app);
    app.add_flag("--json", o.json, "one JSON line per measurement");
    app.add_option("--pace-ms", o.paceMs, "a paced forward pass's milliseconds (backward: twice)")
        ->check(CLI::Range(1, 10000));
    app.add_option("--steps", o.steps, "measured steps per bubble point")->check(CLI::Range(1, 100));
    app.add_option("--rate-mbit", o.rateMbit, "the pair's link rate")->check(CLI::Range(1, 100000));
    app.add_option("--pair-steps", o.pairSteps, "training steps of each pair job")
        ->check(CLI::Range(2, 1000));
    app.add_option("--parts", o.parts, "which parts to run (comma-separated)")
        ->delimiter(',')
        ->check(CLI::IsMember({"bubble", "memory", "pair"}));
    bool noReal = false;
    app.add_flag("--no-real", noReal, "skip the unpaced p = 2 bubble");
    if (auto status = ds::parseCommandLine(app, argc, argv)) return *status;
    o.real = !noReal;
    const auto wanted = [&](const char* part) {
      return std::find(o.parts.begin(), o.parts.end(), part) != o.parts.end();
    };
    ds::kernels::setMatmulThreads(1);  // one core per rank thread
    bool ran = false;
    if (wanted("bubble")) bubblePart(o), ran = true;
    if (wanted("memory")) memoryPart(o), ran = true;
    if (wanted("pair")) ran = pairPart(o, std::filesystem::path(DS_BIN_DIR).string()) || ran;
    return ran ? 0 : 77;  // 77: nothing could run (the pair alone, without namespaces)
  });
}
