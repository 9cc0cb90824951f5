// Two netns test nodes, the same GPT job data-parallel and pipelined through ds-launch.
#include "bench/pipeline/bandwidth_pair.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "bench/gpt_job_dir.h"
#include "common/error.h"
#include "test/netns_nodes.h"

namespace ds::bench {
namespace {

namespace fs = std::filesystem;

std::string readAll(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string shellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Both jobs train on the same global batch of micro x microBatches x 2 samples: data-parallel
// ranks each take half the micro-batches, the pipeline runs all of them through both stages.
void writeConfig(const fs::path& file, const PairOptions& o, int pipe) {
  const int gas = pipe == 2 ? 2 * o.microBatches : o.microBatches;
  std::ofstream(file) << "num-layers: " << o.layers << "\nhidden-size: " << o.hidden
                      << "\nnum-attention-heads: 8\nseq-length: " << o.seq
                      << "\nmax-position-embeddings: " << o.seq
                      << "\ndata-path: data/corpus\ntokenizer-type: ByteTokenizer\n"
                         "split: \"100,0,0\"\ntrain-iters: "
                      << o.steps << "\neval-iters: 0\nlog-interval: 1\nlr: 0.001\nbatch-size: "
                      << o.micro << "\ngradient_accumulation_steps: " << gas
                      << "\npipe-parallel-size: " << pipe
                      << "\npipe-partition-method: parameters\n"
                         "optimizer: {type: AdamW, params: {lr: 0.001}}\n"
                         "zero_optimization: {stage: 1}\n";
}

PairJob runJob(const test::NetnsNodes& nodes, const fs::path& dir, const PairOptions& o,
               int pipe) {
  PairJob job;
  job.pipe = pipe;
  job.data = 2 / pipe;
  job.name = pipe == 2 ? "pipe-parallel-size 2" : "data-parallel 2";
  const std::string config = pipe == 2 ? "pipe.yml" : "data.yml";
  writeConfig(dir / config, o, pipe);
  const std::string logs = pipe == 2 ? "logs-pipe" : "logs-data";
  std::string command;
  for (const std::string& arg : nodes.inNode(0, {})) command += shellQuote(arg) + " ";
  command = "cd " + shellQuote(dir.string()) + " && DS_NETNS_MAP=" +
            shellQuote(nodes.launcherMap()) + " " + command + shellQuote(o.binDir + "/ds-launch") +
            " --launcher netns --hostfile hostfile --master_port 0 --log_dir " + logs +
            " train --config " + config + " > " + logs + ".out 2>&1";
  if (std::system(command.c_str()) != 0)
    throw Error(job.name + " job failed:\n" + readAll(dir / (logs + ".out")));
  const std::string log = readAll(dir / logs / "rank-0.log");
  static const std::regex line(R"(iteration (\d+)/\d+ \|[^\n]*tokens/s ([0-9.]+))");
  const double tokens = 2.0 * o.micro * o.microBatches * o.seq;
  for (auto it = std::sregex_iterator(log.begin(), log.end(), line); it != std::sregex_iterator();
       ++it)
    job.stepSeconds.push_back(tokens / std::stod((*it)[2]));
  if (job.stepSeconds.size() < 2)
    throw Error(job.name + ": fewer than 2 iteration lines in rank 0's log:\n" + log);
  // The first step pays for warming up (allocations, first connections): left out.
  double sum = 0;
  for (size_t i = 1; i < job.stepSeconds.size(); ++i) sum += job.stepSeconds[i];
  job.meanSeconds = sum / static_cast<double>(job.stepSeconds.size() - 1);
  return job;
}

}  // namespace

PairResult runBandwidthPair(const PairOptions& o) {
  PairResult result;
  const test::NetnsSupport& support = test::netnsSupport();
  if (!support.namespaces.empty()) {
    result.skipped = "network namespaces refused: " + support.namespaces;
    return result;
  }
  if (!support.rate.empty()) {
    result.skipped = "tc tbf refused: " + support.rate;
    return result;
  }
  const GptJobDir scratch("bench-pipeline", 64, 4096, 5);
  test::NetnsNodes nodes(2, {.rateBitsPerSecond = static_cast<uint64_t>(o.rateMbit) * 1000000});
  std::ofstream(scratch.path / "hostfile") << nodes.hostfile(1);
  result.jobs.push_back(runJob(nodes, scratch.path, o, 1));
  result.jobs.push_back(runJob(nodes, scratch.path, o, 2));
  return result;
}

}  // namespace ds::bench
