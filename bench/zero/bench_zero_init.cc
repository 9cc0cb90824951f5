// bench_zero_init: partitioned construction (zero.Init) at scale: each rank of a ZeRO job builds
// its engine in a fresh process of its own (this binary, re-run with --rank), one after another
// (construction needs no collective, so ranks are independent), and reports its construction time
// and the peak resident memory it added against the per-rank formula (construction_peak.h):
// working copy + gradients + resident master and optimizer state (or the swap slots) + scratch.
// The model is an MLP of --hidden x --hidden layers sized to --params. Default: 1B parameters,
// ZeRO 3, bf16, world 4.
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/bench_cli.h"
#include "bench/zero/construction_peak.h"
#include "common/json_line.h"
#include "runtime/model/mlp.h"

namespace {

struct Options {
  double params = 1e9;
  int hidden = 4096;
  int world = 4;
  int stage = 3;
  std::string precision = "bf16";
  std::string nvme;  // offload_optimizer nvme_path; empty: no offload
  int64_t subGroupSize = 100'000'000;
  int bufferCount = 2;
  int rank = -1;  // >= 0: be that rank (the child)
  bool json = false;
};

std::string configJson(const Options& o) {
  std::string json = R"({"train_batch_size": )" + std::to_string(o.world) +
                     R"(, "optimizer": {"type": "AdamW", "params": {"lr": 0.001}},
    "zero_optimization": {"stage": )" +
                     std::to_string(o.stage) +
                     R"(, "stage3_param_persistence_threshold": 0, "sub_group_size": )" +
                     std::to_string(o.subGroupSize);
  if (!o.nvme.empty())
    json += R"(, "offload_optimizer": {"device": "nvme", "nvme_path": ")" + o.nvme +
            R"(", "buffer_count": )" + std::to_string(o.bufferCount) + "}";
  json += "}";
  if (o.precision == "bf16") json += R"(, "bf16": {"enabled": true})";
  if (o.precision == "fp16") json += R"(, "fp16": {"enabled": true})";
  return json + "}";
}

std::vector<int> widths(const Options& o) {
  const double perLayer = double(o.hidden) * o.hidden + o.hidden;
  const int layers = std::max(1, static_cast<int>(o.params / perLayer + 0.5));
  return std::vector<int>(static_cast<size_t>(layers) + 1, o.hidden);
}

// The child: this process is rank o.rank; one line "rank added seconds formula".
int runRank(const Options& o) {
  const auto config = ds::runtime::parseDeepSpeedConfig(configJson(o), o.world, "bench_zero_init");
  ds::runtime::Mlp model(widths(o));
  const auto peak = ds::bench::measureConstruction(model, config, o.rank, o.world, 1234);
  const auto formula = ds::bench::constructionFormula(config, model.parameters(), o.rank, o.world);
  std::printf("rank %d added %.0f seconds %.4f kept %.0f slots %.0f scratch %.0f\n", o.rank,
              peak.added, peak.seconds, formula.kept, formula.slots, formula.drawScratch);
  return 0;
}

std::string selfPath() {
  char path[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  return n > 0 ? std::string(path, static_cast<size_t>(n)) : "bench_zero_init";
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"Partitioned construction: per-rank peak memory and time of building a ZeRO engine"};
  ds::bench::showDefaults(app);
  app.add_option("--params", o.params, "parameters (the MLP is sized to it)")
      ->check(CLI::PositiveNumber);
  app.add_option("--hidden", o.hidden, "the MLP's width")->check(CLI::PositiveNumber);
  app.add_option("--world", o.world, "data-parallel ranks")->check(CLI::Range(1, 64));
  app.add_option("--stage", o.stage, "ZeRO stage")->check(CLI::Range(0, 3));
  app.add_option("--precision", o.precision)->check(CLI::IsMember({"fp32", "bf16", "fp16"}));
  app.add_option("--nvme", o.nvme, "offload_optimizer nvme_path (none: no offload)");
  app.add_option("--sub-group-size", o.subGroupSize)->check(CLI::PositiveNumber);
  app.add_option("--buffer-count", o.bufferCount, "offload_optimizer buffer_count")
      ->check(CLI::Range(1, 64));
  app.add_option("--rank", o.rank, "be this rank (internal: the per-rank child)");
  app.add_flag("--json", o.json, "one JSON line per rank, then a summary line");
  if (const auto exitCode = ds::parseCommandLine(app, argc, argv)) return *exitCode;
  if (o.rank >= 0) return runRank(o);

  const std::vector<int> w = widths(o);
  const double params = (w.size() - 1) * (double(o.hidden) * o.hidden + o.hidden);
  if (!o.json)
    std::printf(
        "ZeRO %d %s, %.3g parameters (%zu layers of %d x %d), world %d%s; one process "
        "per rank, in turn\n%6s %12s %12s %12s %10s\n",
        o.stage, o.precision.c_str(), params, w.size() - 1, o.hidden, o.hidden, o.world,
        o.nvme.empty() ? "" : ", offload_optimizer nvme", "rank", "peak MiB", "formula MiB",
        "peak/formula", "seconds");
  double worst = 0, worstFormula = 0, slowest = 0;
  std::string args;
  for (int i = 1; i < argc; ++i) args += std::string(" '") + argv[i] + "'";
  for (int r = 0; r < o.world; ++r) {
    const std::string command = "'" + selfPath() + "'" + args + " --rank " + std::to_string(r);
    FILE* pipe = popen(command.c_str(), "r");
    int rank = -1;
    double added = 0, seconds = 0, kept = 0, slots = 0, scratch = 0;
    const int fields = pipe ? std::fscanf(pipe,
                                          "rank %d added %lf seconds %lf kept %lf slots %lf "
                                          "scratch %lf",
                                          &rank, &added, &seconds, &kept, &slots, &scratch)
                            : 0;
    const int status = pipe ? pclose(pipe) : -1;
    if (fields != 6 || status != 0) {
      std::fprintf(stderr, "bench_zero_init: rank %d's process failed (status %d)\n", r, status);
      return 1;
    }
    const double formula = kept + slots + scratch;
    worst = std::max(worst, added);
    worstFormula = std::max(worstFormula, formula);
    slowest = std::max(slowest, seconds);
    if (o.json) {
      ds::JsonLine line;
      line["rank"] = r;
      line["peak_added_bytes"] = added;
      line["formula_bytes"] = formula;
      line["kept_bytes"] = kept;
      line["slot_bytes"] = slots;
      line["scratch_bytes"] = scratch;
      line["construct_s"] = ds::rounded(seconds, 3);
      ds::printJsonLine(line);
    } else {
      std::printf("%6d %12.1f %12.1f %12.3f %10.2f\n", r, added / 1048576, formula / 1048576,
                  added / formula, seconds);
    }
  }
  if (o.json) {
    ds::JsonLine line;
    line["params"] = params;
    line["stage"] = o.stage;
    line["world"] = o.world;
    line["precision"] = o.precision;
    line["nvme"] = !o.nvme.empty();
    line["max_peak_added_bytes"] = worst;
    line["max_formula_bytes"] = worstFormula;
    line["max_construct_s"] = ds::rounded(slowest, 3);
    ds::printJsonLine(line);
  } else {
    std::printf(
        "formula per rank: working copy + gradients + (master + optimizer state, or "
        "buffer_count swap slots of the largest sub-group) + the %zu KiB draw scratch\n",
        ds::runtime::ZeroStage::kInitChunk * sizeof(float) / 1024);
  }
  return 0;
}
