// bench_gpt: training tokens per second of the GPT model (runtime/model/gpt.h) through the
// engine (one rank, fp32, AdamW on CPU-Adam) beside two baselines measured in the same run at the
// same thread counts:
//   torch      the same model and batch as plain PyTorch eager modules with torch.optim.AdamW
//              (bench/gpt/torch_gpt_bench.py under --python, /usr/bin/python3 by default);
//   sgemm peak a large square sgemm through the same BLAS: what the matrix products could reach;
//              the best of one product after each timed step and five right after the steps.
// "gflops" counts 3 x 2 x the forward MACs per token (forward + backward), as DeepSpeed's profiler.
// Shapes: "demo" (configs/gpt_demo.yml's model) and "gpt2-small" (12 x 768, 12 heads, seq 1024,
// GPT-2's padded vocabulary 50304), where the products are large enough to reach the BLAS's peak;
// a dimension option given on the command line overrides the shape's, which is then "custom".
// Usage: bench_gpt [--shape demo|gpt2-small] [--threads 1,2] [--steps N] [--layers L]
//                  [--hidden H] [--heads A] [--seq T] [--vocab V] [--batch B]
//                  [--attention-dropout P] [--hidden-dropout P] [--json] [--no-torch]
//                  [--python PATH]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/bench_cli.h"
#include "bench/bench_training.h"
#include "bench/command_seconds.h"
#include "common/command_output.h"
#include "common/guarded_main.h"
#include "common/json_line.h"
#include "kernels/cpu/kernel_timers.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_peak.h"
#include "kernels/cpu/transformer_kernels.h"
#include "runtime/comm/shm_communicator.h"
#include "runtime/config/ds_config.h"
#include "runtime/engine/engine.h"
#include "runtime/model/gpt.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Shape {
  const char* name;
  int layers, hidden, heads, seq, vocab, batch, steps;
};

// batch x seq and the step count keep each shape's run to a minute or two on 2 cores.
constexpr Shape kShapes[] = {{"demo", 4, 256, 4, 128, 257, 8, 10},
                             {"gpt2-small", 12, 768, 12, 1024, 50304, 1, 3}};

struct Options {
  std::string shape = "demo";
  std::vector<int> threads = {1, 2};
  int steps = 10, layers = 4, hidden = 256, heads = 4, seq = 128, vocab = 257, batch = 8;
  double attentionDropout = 0.0, hiddenDropout = 0.0;  // NeoX's keys; GPT-2 trained with 0.1
  bool json = false, torch = true;
  // The interpreter whose torch is the baseline: a venv's python3 where torch is not the system's.
  std::string python = "/usr/bin/python3";
};

ds::runtime::GptConfig gptConfig(const Options& o) {
  ds::runtime::GptConfig c;
  c.numLayers = o.layers;
  c.hiddenSize = o.hidden;
  c.numAttentionHeads = o.heads;
  c.seqLength = c.maxPositionEmbeddings = o.seq;
  c.vocabSize = o.vocab;
  c.attentionDropout = o.attentionDropout;
  c.hiddenDropout = o.hiddenDropout;
  return c;
}

// Seconds per timed step by kernel family (kernels/cpu/kernel_timers.h), the optimizer's step and
// the whole step; "other" is what none of them covers (the engine's gradient handling, copies).
struct Breakdown {
  double family[ds::kernels::kKernelFamilies] = {};
  double optimizer = 0, step = 0;
};

// Also raises `peak` to the best 1024^3 sgemm sampled between the timed steps.
double oursTokensPerSecond(const Options& o, int threads, double& loss, Breakdown& where,
                           double& peak) {
  using namespace ds::runtime;
  setenv("OMP_NUM_THREADS", std::to_string(threads).c_str(), 1);  // CPU-Adam's pool
  ds::kernels::setMatmulThreads(threads);
  Gpt model(gptConfig(o));
  const std::string json = R"({"train_micro_batch_size_per_gpu": )" + std::to_string(o.batch) +
                           R"(, "optimizer": {"type": "AdamW", "params": {"lr": 0.001,
                           "weight_decay": 0.1}}})";
  const DeepSpeedConfig config = parseDeepSpeedConfig(json, 1, "bench_gpt");
  auto group = ShmCommunicator::inProcessGroup(1);
  Engine engine(model, config, group[0], 1);
  Batch batch;
  batch.size = static_cast<size_t>(o.batch);
  for (int i = 0; i < o.batch; ++i) batch.sampleIds.push_back(static_cast<uint64_t>(i));  // masks
  uint64_t x = 1;
  for (int i = 0; i < o.batch * o.seq; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    batch.inputIds.push_back(static_cast<int32_t>((x >> 33) % static_cast<uint64_t>(o.vocab)));
    batch.targetIds.push_back(static_cast<int32_t>((x >> 17) % static_cast<uint64_t>(o.vocab)));
  }
  constexpr int kWarmUp = 2;
  ds::bench::trainSteps(engine, group[0], batch, kWarmUp);
  ds::kernels::setKernelTiming(true);
  double s = 0.0;
  ds::bench::StepProbe probe;
  probe.afterStep = [&](const ds::bench::StepTiming& step) {
    where.optimizer += step.updateSeconds;
    s += step.seconds;
    loss = step.loss;
    // Untimed, between the steps (the kernel timers time the model's loops, not matmul itself):
    // the peak at the speed the machine ran the steps at.
    peak = std::max(peak, ds::kernels::sgemmPeakGflops(threads, 1, 0.0));
  };
  ds::bench::trainSteps(engine, group[0], batch, kWarmUp + o.steps, probe);
  for (size_t f = 0; f < ds::kernels::kKernelFamilies; ++f)
    where.family[f] =
        ds::kernels::kernelSeconds(static_cast<ds::kernels::KernelFamily>(f)) / o.steps;
  ds::kernels::setKernelTiming(false);
  where.optimizer /= o.steps;
  where.step = s / o.steps;
  return static_cast<double>(o.batch) * o.seq * o.steps / s;
}

double torchTokensPerSecond(const Options& o, int threads) {
  // PyTorch's model takes the padded vocabulary: the same output layer and softmax as ours.
  const int vocab = gptConfig(o).paddedVocabSize();
  const std::string cmd = "OMP_NUM_THREADS=" + std::to_string(threads) +
                          " " + o.python + " " DS_SOURCE_DIR "/bench/gpt/torch_gpt_bench.py " +
                          std::to_string(o.layers) + " " + std::to_string(o.hidden) + " " +
                          std::to_string(o.heads) + " " + std::to_string(o.seq) + " " +
                          std::to_string(vocab) + " " + std::to_string(o.batch) + " " +
                          std::to_string(o.steps) + " " + std::to_string(threads) + " " +
                          std::to_string(o.attentionDropout) + " " +
                          std::to_string(o.hiddenDropout) + " 2>/dev/null";
  const std::optional<std::string> out = ds::commandOutput(cmd);
  if (!out) return 0.0;
  const auto j = nlohmann::json::parse(*out, nullptr, false);
  return j.is_discarded() || !j.contains("tokens_per_s") ? 0.0 : j["tokens_per_s"].get<double>();
}

// The shape's dimensions, batch and steps, except those given on the command line; the run names
// the shape only when no model dimension was overridden.
void applyShape(const CLI::App& app, const std::string& name, Options& o) {
  for (const Shape& shape : kShapes) {
    if (name != shape.name) continue;
    bool custom = false;
    auto take = [&](const char* flag, int& value, int preset) {
      if (app.count(flag) == 0)
        value = preset;
      else
        custom = custom || value != preset;
    };
    take("--layers", o.layers, shape.layers);
    take("--hidden", o.hidden, shape.hidden);
    take("--heads", o.heads, shape.heads);
    take("--seq", o.seq, shape.seq);
    take("--vocab", o.vocab, shape.vocab);
    if (app.count("--batch") == 0) o.batch = shape.batch;  // the workload's size, not the model's
    if (app.count("--steps") == 0) o.steps = shape.steps;
    o.shape = custom ? "custom" : shape.name;
  }
}

// ", dropout attention P hidden Q" when either is set (both sides train with it).
std::string dropoutText(const Options& o) {
  if (o.attentionDropout == 0.0 && o.hiddenDropout == 0.0) return "";
  char text[96];
  std::snprintf(text, sizeof text, ", dropout attention %g hidden %g", o.attentionDropout,
                o.hiddenDropout);
  return text;
}

// Where a step's time goes, one line per family: seconds, share of the step, and for the matrix
// products and attention the GFLOPS they reached (forward + backward = 3 x the forward MACs).
void printBreakdown(int threads, const Breakdown& b, const ds::runtime::Gpt::Macs& macs,
                    double samples, double peak) {
  using ds::kernels::KernelFamily;
  std::printf("where a step's %.3f s goes at %d thread%s:\n", b.step, threads,
              threads > 1 ? "s" : "");
  double covered = b.optimizer;
  for (size_t f = 0; f < ds::kernels::kKernelFamilies; ++f) {
    const auto family = static_cast<KernelFamily>(f);
    const double seconds = b.family[f];
    covered += seconds;
    std::printf("  %-18s %8.3f s %5.1f%%", ds::kernels::kernelFamilyName(family), seconds,
                100.0 * seconds / b.step);
    const double flops = family == KernelFamily::MatrixProducts
                             ? 6.0 * (macs.attentionProjections + macs.mlp + macs.head)
                         : family == KernelFamily::Attention ? 6.0 * macs.attentionScores
                                                             : 0.0;
    if (flops > 0 && seconds > 0)
      std::printf("  %7.1f GFLOPS, %3.0f%% of the sgemm peak", flops * samples / seconds / 1e9,
                  100.0 * flops * samples / seconds / 1e9 / peak);
    std::printf("\n");
  }
  std::printf("  %-18s %8.3f s %5.1f%%\n", "optimizer step", b.optimizer,
              100.0 * b.optimizer / b.step);
  std::printf("  %-18s %8.3f s %5.1f%%\n", "other", b.step - covered,
              100.0 * (b.step - covered) / b.step);
}

int run(const Options& o) {
  using namespace ds::runtime;
  const Gpt shape(gptConfig(o));
  const char* isa = ds::kernels::kernelIsaName(ds::kernels::bestKernelIsa());
  const double flopsPerToken = shape.trainingFlopsPerToken(o.seq);
  if (!o.json)
    std::printf(
        "GPT %s: %d layers, hidden %d, %d heads, seq %d, vocab %d, batch %d%s: %zu parameters; "
        "kernels %s; %s\n%8s %14s %14s %8s %10s %12s %8s\n",
        o.shape.c_str(), o.layers, o.hidden, o.heads, o.seq, o.vocab, o.batch,
        dropoutText(o).c_str(), shape.parameterCount(), isa, ds::kernels::matmulLibrary(),
        "threads", "tokens/s", "torch tok/s", "ratio", "GFLOPS", "sgemm peak", "of peak");
  const ds::runtime::Gpt::Macs macsPerSample = shape.forwardMacsPerSample(o.seq);
  const double samplesPerStep = o.batch;
  std::vector<Breakdown> breakdowns;
  std::vector<double> peaks;
  for (int t : o.threads) {
    double loss = 0.0;
    Breakdown where;
    double peak = 0.0;
    const double ours = oursTokensPerSecond(o, t, loss, where, peak);
    peak = std::max(peak, ds::kernels::sgemmPeakGflops(t));
    const double torch = o.torch ? torchTokensPerSecond(o, t) : 0.0;
    const double gflops = ours * flopsPerToken / 1e9;
    if (o.json) {
      using ds::rounded;
      ds::printJsonLine({{"threads", t},
                         {"params", shape.parameterCount()},
                         {"tokens_per_s", rounded(ours, 1)},
                         {"torch_tokens_per_s", rounded(torch, 1)},
                         {"gflops", rounded(gflops, 2)},
                         {"sgemm_peak_gflops", rounded(peak, 2)},
                         {"isa", isa},
                         {"shape", o.shape},
                         {"attention_dropout", o.attentionDropout},
                         {"hidden_dropout", o.hiddenDropout}});
    } else {
      std::printf("%8d %14.0f %14.0f %7.2fx %10.1f %12.1f %7.0f%%\n", t, ours, torch,
                  torch > 0 ? ours / torch : 0.0, gflops, peak, 100.0 * gflops / peak);
      breakdowns.push_back(where);
      peaks.push_back(peak);
    }
  }
  // Macs are per sample: the families' GFLOPS count a step's samples.
  for (size_t i = 0; i < breakdowns.size(); ++i)
    printBreakdown(o.threads[i], breakdowns[i], macsPerSample, samplesPerStep, peaks[i]);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return ds::guardedMain("bench_gpt", [&] {
    Options o;
    std::string shapeName = "demo";
    CLI::App app{
        "bench_gpt: GPT training tokens per second through the engine beside PyTorch "
        "eager and the sgemm peak"};
    ds::bench::showDefaults(app);
    app.add_option("--shape", shapeName, "model shape: demo or gpt2-small (sets the options below)")
        ->check(CLI::IsMember({"demo", "gpt2-small"}));
    app.add_option("--threads", o.threads, "thread counts (comma-separated)")
        ->delimiter(',')
        ->check(CLI::Range(1, 1024));
    app.add_option("--steps", o.steps, "timed steps")->check(CLI::Range(1, 100000));
    app.add_option("--layers", o.layers, "transformer layers")->check(CLI::Range(1, 1024));
    app.add_option("--hidden", o.hidden, "hidden size")->check(CLI::Range(1, 65536));
    app.add_option("--heads", o.heads, "attention heads")->check(CLI::Range(1, 1024));
    app.add_option("--seq", o.seq, "sequence length")->check(CLI::Range(1, 65536));
    app.add_option("--vocab", o.vocab, "vocabulary (padded to 128)")->check(CLI::Range(1, 1 << 24));
    app.add_option("--batch", o.batch, "micro-batch size")->check(CLI::Range(1, 65536));
    app.add_option("--attention-dropout", o.attentionDropout,
                   "dropout on the attention probabilities (both sides)")
        ->check(CLI::Range(0.0, 0.99));
    app.add_option("--hidden-dropout", o.hiddenDropout,
                   "dropout on the embeddings and the blocks' attention and MLP outputs")
        ->check(CLI::Range(0.0, 0.99));
    app.add_flag("--json", o.json, "print one JSON line per thread count");
    bool noTorch = false;
    app.add_flag("--no-torch", noTorch, "skip the PyTorch baseline");
    app.add_option("--python", o.python, "the Python interpreter that runs the PyTorch baseline")
        ->check(CLI::ExistingFile);
    if (auto status = ds::parseCommandLine(app, argc, argv)) return *status;
    o.torch = !noTorch;
    applyShape(app, shapeName, o);
    return run(o);
  });
}
