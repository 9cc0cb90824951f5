// bench_gpt_memory: where one rank's memory goes when the GPT trainer runs on 2 loopback nodes x
// 2 ranks, at ZeRO stages 0-3 and with checkpoint-activations: the peak resident set (getrusage),
// the engine's model-state bytes next to `ds-config memory`'s estimate for the same config, and
// the model's peak activation bytes. All from real ds-launch jobs on a synthetic corpus.
// --seqs T1,T2,...: instead, one rank training a GPT at each sequence length (micro-batch 1, rotary
// positions), its peak RSS less its model states against T: linear with flash attention.
// Usage: bench_gpt_memory [--layers 8] [--hidden 512] [--batch 4] [--seq 128] [--seqs ...]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "bench/bench_cli.h"
#include "bench/command_seconds.h"
#include "bench/gpt_job_dir.h"
#include "common/guarded_main.h"

namespace {

namespace fs = std::filesystem;

struct Options {
  int layers = 8, hidden = 512, batch = 4, seq = 128;
  std::vector<int> seqs;
  int ulysses = 1;  // --seqs: ranks sharing each sample's positions (DeepSpeed-Ulysses)
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

// Rank 0's memory line: peak RSS, model states, buffers and activations (MiB).
struct MemoryLine {
  double peakRss, modelStates, buffers, activations;
};
MemoryLine memoryLine(const fs::path& log) {
  const std::string text = readAll(log);
  std::smatch m;
  static const std::regex line(
      R"(memory: RSS [0-9.]+ MiB, peak RSS ([0-9.]+) MiB; model states ([0-9.]+) MiB .*buffers ([0-9.]+) MiB; activations ([0-9.]+) MiB)");
  if (!std::regex_search(text, m, line)) throw ds::Error("no memory line in rank 0's log:\n" + text);
  return {std::stod(m[1]), std::stod(m[2]), std::stod(m[3]), std::stod(m[4])};
}

// One rank at each sequence length: what grows with T once the model states are set aside.
int sequenceScaling(const Options& o) {
  const int longest = *std::max_element(o.seqs.begin(), o.seqs.end());
  // Two samples of the longest sequence, and some to spare: documents are packed into samples.
  const ds::bench::GptJobDir scratch("bench-gpt-memory", 8, static_cast<size_t>(longest) / 2 + 64, 7);
  const fs::path& dir = scratch.path;
  const int u = o.ulysses;
  if (u == 1)
    std::ofstream(dir / "hostfile") << "127.0.0.1 slots=1\n";
  else
    std::ofstream(dir / "hostfile") << "127.0.0.1 slots=" << (u + 1) / 2 << "\n127.0.0.2 slots="
                                    << u / 2 << "\n";
  const std::string bin = fs::path(DS_BIN_DIR).string();
  std::printf("GPT %d layers x %d hidden, rotary, micro-batch 1, bf16, AdamW, ZeRO 0; %s; "
              "MiB, growth against the first row\n",
              o.layers, o.hidden,
              u == 1 ? "one rank"
                     : (std::to_string(u) + " ranks sharing each sample (sequence_parallel_size " +
                        std::to_string(u) + ", 2 loopback nodes), rank 0's figures")
                           .c_str());
  std::printf("%8s %10s %12s %14s %12s %9s %9s %9s %8s\n", "seq", "peak RSS", "model state",
              "RSS - states", "activations", "T x", "RSS-st x", "act x", "step s");
  double firstSeq = 0, firstRest = 0, firstAct = 0;
  for (int seq : o.seqs) {
    std::ofstream(dir / "gpt.yml")
        << "num-layers: " << o.layers << "\nhidden-size: " << o.hidden
        << "\nnum-attention-heads: 8\npos-emb: rotary\nseq-length: " << seq
        << "\nmax-position-embeddings: " << seq
        << "\ndata-path: data/corpus\ntokenizer-type: ByteTokenizer\nsplit: \"100,0,0\"\n"
           "train-iters: 2\neval-iters: 0\nlr: 0.001\nbatch-size: 1\nprecision: bfloat16\n"
           "optimizer: {type: AdamW, params: {lr: 0.001}}\nzero_optimization: {stage: 0}\n"
        << "sequence_parallel_size: " << u << "\n";
    const auto start = std::chrono::steady_clock::now();
    capture("cd " + dir.string() + " && " + bin + "/ds-launch --hostfile hostfile --master_port 0 "
            "--log_dir logs train --config gpt.yml 2>&1");
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / 2;
    const MemoryLine m = memoryLine(dir / "logs/rank-0.log");
    const double rest = m.peakRss - m.modelStates;
    if (firstSeq == 0) firstSeq = seq, firstRest = rest, firstAct = m.activations;
    std::printf("%8d %10.1f %12.1f %14.1f %12.1f %8.2fx %8.2fx %8.2fx %8.1f\n", seq, m.peakRss,
                m.modelStates, rest, m.activations, seq / firstSeq, rest / firstRest,
                m.activations / firstAct, seconds);
  }
  return 0;
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
    const MemoryLine line = memoryLine(dir / "logs/rank-0.log");
    const auto estimate = nlohmann::json::parse(
        capture(bin + "/ds-config memory " + (dir / "gpt.yml").string() + " --world-size 4 --json"));
    const double expected = estimate[stage]["total"].get<double>() / (1024.0 * 1024.0);
    const double state = line.modelStates;
    const std::string name = "ZeRO " + std::to_string(stage) + (checkpointing ? " + checkpointing" : "");
    std::printf("%-22s %10.1f %12.1f %12.1f %7.3fx %12.1f %10.1f\n", name.c_str(), line.peakRss,
                state, expected, state / expected, line.activations, line.buffers);
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
    app.add_option("--seqs", o.seqs,
                   "instead: one rank at each of these sequence lengths (e.g. 2048,8192,32768)")
        ->delimiter(',')
        ->check(CLI::Range(2, 1 << 20));
    app.add_option("--ulysses", o.ulysses,
                   "with --seqs: this many ranks share each sample (sequence_parallel_size)")
        ->check(CLI::Range(1, 64));
    if (auto status = ds::parseCommandLine(app, argc, argv)) return *status;
    return o.seqs.empty() ? run(o) : sequenceScaling(o);
  });
}
