// bench_autotuning: what the model_based autotuner saves against an exhaustive grid over the
// same space, both run here in the same run through ds-launch --autotuning on two loopback nodes
// x two ranks: the demo's GPT (4 layers of 256, seq 128, 3.3M parameters; a synthetic byte
// corpus) with its global batch of 16, the ZeRO stage and the micro-batch left to the tuner.
// The grid is gridsearch with early stopping and the trial cap out of reach. Printed: the
// experiments and seconds of each, the winner's measured throughput, the grid's best, and the
// grid's own measurement of the tuner's winner (the fair comparison: same run, same conditions).
// Usage: bench_autotuning [--fast false] [--end_profile_step 10] [--json]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "bench/bench_cli.h"
#include "bench/gpt_job_dir.h"
#include "common/error.h"
#include "common/guarded_main.h"
#include "common/json_line.h"

namespace {

namespace fs = std::filesystem;

struct Options {
  bool fast = true;
  int startProfileStep = 3;
  int endProfileStep = 10;
  bool json = false;
};

std::string yaml(const Options& o, const std::string& tuner, const std::string& results) {
  std::string text = R"(num-layers: 4
hidden-size: 256
num-attention-heads: 4
seq-length: 128
max-position-embeddings: 128
pos-emb: rotary
rotary-pct: 0.5
tokenizer-type: ByteTokenizer
data-path: data/corpus
split: 969,30,1
train-iters: 800
lr: 0.002
log-interval: 25
eval-interval: 200
eval-iters: 4
precision: bfloat16
train_batch_size: 16
train_micro_batch_size_per_gpu: auto
optimizer:
  type: AdamW
  params:
    betas: [0.9, 0.95]
zero_optimization:
  stage: auto
autotuning:
  enabled: true
  fast: )" + std::string(o.fast ? "true" : "false") +
                     "\n  start_profile_step: " + std::to_string(o.startProfileStep) +
                     "\n  end_profile_step: " + std::to_string(o.endProfileStep) +
                     "\n  tuner_type: " + tuner + "\n  results_dir: " + results +
                     "\n  exps_dir: " + results + "-exps\n";
  if (tuner == "gridsearch") text += "  tuner_early_stopping: 100000\n  tuner_num_trials: 100000\n";
  return text;
}

struct Tuning {
  double seconds = 0;
  int experiments = 0;
  std::string best;
  double bestMetric = 0;
  std::map<std::string, double> measured;  // every experiment's throughput
};

Tuning runTuning(const fs::path& dir, const Options& o, const std::string& tuner) {
  const std::string results = tuner + "_results";
  std::ofstream(dir / (tuner + ".yml")) << yaml(o, tuner, results);
  const std::string command = "cd " + dir.string() + " && " +
                              (fs::path(DS_BIN_DIR) / "ds-launch").string() +
                              " --hostfile hostfile --autotuning tune train --config " + tuner +
                              ".yml > " + tuner + ".log 2>&1";
  const auto start = std::chrono::steady_clock::now();
  const int status = std::system(command.c_str());
  Tuning t;
  t.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (status != 0)
    throw ds::Error("ds-launch --autotuning tune (" + tuner + ") failed; see " +
                    (dir / (tuner + ".log")).string());
  std::ifstream in(dir / results / "summary.json");
  const nlohmann::json summary = nlohmann::json::parse(in);
  for (const auto& e : summary["experiments"]) {
    const std::string state = e["status"];
    if (state == "pruned" || state == "not run") continue;
    ++t.experiments;
    if (e.contains("metric")) t.measured[e["name"]] = e["metric"].get<double>();
  }
  t.best = summary["best"].get<std::string>();
  t.bestMetric = t.measured.at(t.best);
  return t;
}

}  // namespace

int run(int argc, char** argv) {
  Options o;
  CLI::App app{"bench_autotuning: the model_based autotuner against an exhaustive grid, same run"};
  ds::bench::showDefaults(app);
  app.add_option("--fast", o.fast, "DeepSpeed's fast: tune the ZeRO stage and micro-batch only");
  app.add_option("--start_profile_step", o.startProfileStep, "steps before the timed ones")
      ->check(CLI::Range(1, 1000));
  app.add_option("--end_profile_step", o.endProfileStep, "the last timed step")
      ->check(CLI::Range(2, 1000));
  app.add_flag("--json", o.json, "one JSON object on stdout");
  if (const auto status = ds::parseCommandLine(app, argc, argv)) return *status;
  if (o.endProfileStep <= o.startProfileStep)
    throw ds::Error("--end_profile_step must come after --start_profile_step");

  // 16 samples a step for 800 steps and the evaluation's: a corpus the data checks accept.
  ds::bench::GptJobDir dir("bench-autotuning", 2000, 1200, 7);
  std::ofstream(dir.path / "hostfile") << "127.0.0.1 slots=2\n127.0.0.2 slots=2\n";
  const Tuning tuned = runTuning(dir.path, o, "model_based");
  const Tuning grid = runTuning(dir.path, o, "gridsearch");
  const double winnerInGrid = grid.measured.count(tuned.best) ? grid.measured.at(tuned.best) : 0;

  if (o.json) {
    ds::printJsonLine({{"model", "gpt-demo-3.3M"},
                       {"experiments", tuned.experiments},
                       {"grid_experiments", grid.experiments},
                       {"tune_seconds", ds::rounded(tuned.seconds, 1)},
                       {"grid_seconds", ds::rounded(grid.seconds, 1)},
                       {"best_throughput", ds::rounded(tuned.bestMetric, 2)},
                       {"grid_best_throughput", ds::rounded(grid.bestMetric, 2)},
                       {"winner", tuned.best},
                       {"grid_best", grid.best},
                       {"winner_in_grid_throughput", ds::rounded(winnerInGrid, 2)}});
    return 0;
  }
  std::printf("model_based: %d experiments in %.1f s, winner %s at %.2f samples/s\n",
              tuned.experiments, tuned.seconds, tuned.best.c_str(), tuned.bestMetric);
  std::printf("grid:        %d experiments in %.1f s, best %s at %.2f samples/s\n",
              grid.experiments, grid.seconds, grid.best.c_str(), grid.bestMetric);
  std::printf(
      "ratios: experiments %.2f of the grid's, time %.2f of the grid's; the winner "
      "measured in the grid run: %.2f samples/s, %.3f of the grid's best\n",
      static_cast<double>(tuned.experiments) / grid.experiments, tuned.seconds / grid.seconds,
      winnerInGrid, winnerInGrid / grid.bestMetric);
  return 0;
}

int main(int argc, char** argv) {
  return ds::guardedMain("bench_autotuning", [&] { return run(argc, argv); });
}
