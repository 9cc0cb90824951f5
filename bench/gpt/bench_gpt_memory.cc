// bench_gpt_memory: where one rank's memory goes when the GPT trainer runs on 2 loopback nodes x
// 2 ranks, at ZeRO stages 0-3 and with checkpoint-activations: the peak resident set (getrusage),
// the engine's model-state bytes next to `ds-config memory`'s estimate for the same config, and
// the model's peak activation bytes. All from real ds-launch jobs on a synthetic corpus.
// Usage: bench_gpt_memory [--layers 8] [--hidden 512] [--batch 4] [--seq 128]
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>

#include "bench/bench_cli.h"
#include "bench/command_seconds.h"
#include "bench/gpt_job_dir.h"
#include "common/guarded_main.h"

namespace {

namespace fs = std::filesystem;

struct Options {
  int layers = 8, hidden = 512, batch = 4, seq = 128;
};

std::string readAll(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string capture(const std::string& cmd) {
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) throw ds::Error("cannot run " + cmd);
  std::string out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  if (pclose(pipe) != 0) throw ds::Error(cmd + " failed:\n" + out);
  return out;
}

int run(const Options& o) {
  const ds::bench::GptJobDir scratch("bench-gpt-memory", 200, 2000, 7);
  const fs::path& dir = scratch.path;
  std::ofstream(dir / "hostfile") << "127.0.0.1 slots=2\n127.0.0.2 slots=2\n";
  const std::string bin = fs::path(DS_BIN_DIR).string();
  std::printf("GPT %d layers x %d hidden, micro-batch %d x %d tokens, bf16, AdamW; 2 nodes x 2 ranks; "
              "rank 0's figures (MiB)\n",
              o.layers, o.hidden, o.batch, o.seq);
  std::printf("%-22s %10s %12s %12s %8s %12s %10s\n", "run", "peak RSS", "model state",
              "ds-config", "ratio", "activations", "buffers");
  for (int variant = 0; variant < 5; ++variant) {
    const int stage = variant < 4 ? variant : 2;
    const bool checkpointing = variant == 4;
    std::ofstream(dir / "gpt.yml")
        << "num-layers: " << o.layers << "\nhidden-size: " << o.hidden
        << "\nnum-attention-heads: 8\nseq-length: " << o.seq
        << "\nmax-position-embeddings: " << o.seq
        << "\ndata-path: data/corpus\ntokenizer-type: ByteTokenizer\nsplit: \"100,0,0\"\n"
           "train-iters: 2\neval-iters: 0\n"
           "lr: 0.001\nbatch-size: "
        << o.batch << "\nprecision: bfloat16\ncheckpoint-activations: "
        << (checkpointing ? "true" : "false")
        << "\noptimizer: {type: AdamW, params: {lr: 0.001}}\nzero_optimization: {stage: " << stage
        << "}\n";
    capture("cd " + dir.string() + " && " + bin + "/ds-launch --hostfile hostfile --master_port 0 "
            "--log_dir logs train --config gpt.yml 2>&1");
    const std::string log = readAll(dir / "logs/rank-0.log");
    std::smatch m;
    static const std::regex line(
        R"(memory: RSS [0-9.]+ MiB, peak RSS ([0-9.]+) MiB; model states ([0-9.]+) MiB .*buffers ([0-9.]+) MiB; activations ([0-9.]+) MiB)");
    if (!std::regex_search(log, m, line)) throw ds::Error("no memory line in rank 0's log:\n" + log);
    const auto estimate = nlohmann::json::parse(
        capture(bin + "/ds-config memory " + (dir / "gpt.yml").string() + " --world-size 4 --json"));
    const double expected = estimate[stage]["total"].get<double>() / (1024.0 * 1024.0);
    const double state = std::stod(m[2]);
    const std::string name = "ZeRO " + std::to_string(stage) + (checkpointing ? " + checkpointing" : "");
    std::printf("%-22s %10.1f %12.1f %12.1f %7.3fx %12.1f %10.1f\n", name.c_str(), std::stod(m[1]),
                state, expected, state / expected, std::stod(m[4]), std::stod(m[3]));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return ds::guardedMain("bench_gpt_memory", [&] {
    Options o;
    CLI::App app{
        "bench_gpt_memory: one rank's memory in GPT jobs on 2 loopback nodes x 2 ranks, "
        "ZeRO 0-3"};
    ds::bench::showDefaults(app);
    app.add_option("--layers", o.layers, "transformer layers")->check(CLI::Range(1, 1024));
    app.add_option("--hidden", o.hidden, "hidden size")->check(CLI::Range(8, 65536));
    app.add_option("--batch", o.batch, "micro-batch size")->check(CLI::Range(1, 65536));
    app.add_option("--seq", o.seq, "sequence length")->check(CLI::Range(1, 65536));
    if (auto status = ds::parseCommandLine(app, argc, argv)) return *status;
    return run(o);
  });
}
