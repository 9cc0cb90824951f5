// bench_elastic: how long an elastic job takes to go on after a node dies. A ds-launch
// --elastic_training job of the demo's GPT (4 layers x 256, synthetic corpus) runs on 3 loopback
// nodes x 2 ranks; both ranks of the third node are SIGKILLed, and the log lines give the
// breakdown, each from the kill: detect (ds-launch drops the node), restart (the next membership's
// processes are started), reload (rank 0 resumed from the checkpoint), first step (rank 0 finished
// a step at the new size). Then the node offers itself back (ds-worker --join, taken at once with
// --rescale_now): grow is the time from the offer to the first step at 6 ranks.
// Usage: bench_elastic [--json]
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include "bench/bench_cli.h"
#include "bench/free_port.h"
#include "bench/gpt_job_dir.h"
#include "common/json_line.h"
#include "common/guarded_main.h"
#include "common/spawn.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::string readAll(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The job: 3 loopback nodes x 2 ranks of an elastic GPT, started by ds-launch in the background.
struct ElasticJob {
  fs::path dir;
  int port = 0;
  std::string token;
  ds::Spawned process;
  Clock::time_point deadline;
};

ElasticJob startJob(const fs::path& dir) {
  std::ofstream(dir / "hostfile") << "127.0.0.1 slots=2\n127.0.0.2 slots=2\n127.0.0.3 slots=2\n";
  std::ofstream(dir / "gpt.yml")
      << "num-layers: 4\nhidden-size: 256\nnum-attention-heads: 4\nseq-length: 128\n"
         "max-position-embeddings: 128\npos-emb: rotary\ndata-path: data/corpus\n"
         "tokenizer-type: ByteTokenizer\n"
         "split: \"100,0,0\"\ntrain-iters: 2000\neval-iters: 0\nlr: 0.001\nlog-interval: 1\n"
         "save: ckpt\nsave-interval: 5\nprecision: bfloat16\nzero_optimization: {stage: 2}\n"
         "elasticity: {enabled: true, max_train_batch_size: 24, micro_batch_sizes: [1, 2, 3, 4],"
         " min_gpus: 1, max_gpus: 6, version: 0.1}\n";
  ElasticJob job;
  job.dir = dir;
  job.port = ds::bench::freeLoopbackPort();
  job.token = "bench-elastic-token-" + std::to_string(getpid()) + "-0123456789";
  const std::string launch = std::string(DS_BIN_DIR) + "/ds-launch";
  ds::SpawnOptions spawn;
  spawn.argv = {"/bin/sh", "-c",
                "cd " + dir.string() + " && exec " + launch +
                    " --hostfile hostfile --master_port " + std::to_string(job.port) +
                    " --log_dir logs --elastic_training --rescale_now train --config gpt.yml "
                    "--print_param_hash >out 2>err"};
  spawn.env = {{"DS_JOB_TOKEN", job.token}};
  spawn.label = "bench_elastic";
  job.process = ds::spawnProcess(spawn);
  job.deadline = Clock::now() + std::chrono::minutes(5);
  return job;
}

// The last step rank 0 logged a parameter hash for.
int lastStep(const ElasticJob& job) {
  static const std::regex hash(R"(step (\d+) param_hash)");
  const std::string log = readAll(job.dir / "logs/rank-0.log");
  int last = 0;
  for (std::sregex_iterator it(log.begin(), log.end(), hash), end; it != end; ++it)
    last = std::stoi((*it)[1]);
  return last;
}

// SIGKILLs both ranks of 127.0.0.3, found by their command lines, once the job is at step 8.
Clock::time_point killThirdNode(const ElasticJob& job) {
  while (lastStep(job) < 8 && Clock::now() < job.deadline) {
    if (waitpid(job.process.pid, nullptr, WNOHANG) == job.process.pid)
      throw ds::Error("the elastic job ended before the kill:\n" + readAll(job.dir / "err"));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::string pids;
  FILE* p = popen("pgrep -f 'ds-worker.*127\\.0\\.0\\.3'", "r");
  char buf[256];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) pids.append(buf, n);
  pclose(p);
  const auto killed = Clock::now();
  std::istringstream list(pids);
  int victims = 0;
  for (int pid; list >> pid;) victims += ::kill(pid, SIGKILL) == 0;
  if (victims == 0)
    throw ds::Error("found no worker of 127.0.0.3 to kill: " + readAll(job.dir / "err"));
  return killed;
}

const std::regex kResumed(R"(resumed from \S+/global_step(\d+))");

// Seconds from the kill to each milestone of the shrink.
struct Shrink {
  double detect = -1, restart = -1, reload = -1, first = -1;
  int resumedAt = -1;
};

Shrink measureShrink(const ElasticJob& job, Clock::time_point killed) {
  Shrink s;
  while (s.first < 0 && Clock::now() < job.deadline) {
    const double t = std::chrono::duration<double>(Clock::now() - killed).count();
    if (s.detect < 0 && readAll(job.dir / "err").find("dropping node") != std::string::npos)
      s.detect = t;
    const std::string out = readAll(job.dir / "out");
    if (s.restart < 0 && out.find("elastic epoch 2") != std::string::npos) s.restart = t;
    std::smatch m;
    if (s.reload < 0 && std::regex_search(out, m, kResumed)) {
      s.reload = t;
      s.resumedAt = std::stoi(m[1]);
    }
    if (s.resumedAt >= 0 && lastStep(job) > s.resumedAt) s.first = t;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (s.first < 0)
    throw ds::Error("the job did not go on after the kill:\n" + readAll(job.dir / "err"));
  return s;
}

// Grow: the node offers itself back (ds-worker --join) and is taken at once (--rescale_now);
// seconds from the offer to the first step at 6 ranks.
double measureGrow(const ElasticJob& job) {
  const auto offered = Clock::now();
  const std::string join = "DS_JOB_TOKEN=" + job.token + " " + DS_BIN_DIR +
                           "/ds-worker --join 127.0.0.1:" + std::to_string(job.port) +
                           " --host 127.0.0.3 --slots 2 >/dev/null 2>&1";
  if (std::system(join.c_str()) != 0)
    throw ds::Error("the job did not take the node back:\n" + readAll(job.dir / "err"));
  double grow = -1;
  int regrownAt = -1;
  while (grow < 0 && Clock::now() < job.deadline) {
    const std::string out = readAll(job.dir / "out");
    if (regrownAt < 0 && out.find("elastic epoch 3") != std::string::npos) {
      std::smatch m;
      std::string rest = out.substr(out.find("elastic epoch 3"));
      if (std::regex_search(rest, m, kResumed)) regrownAt = std::stoi(m[1]);
    }
    if (regrownAt >= 0 && lastStep(job) > regrownAt)
      grow = std::chrono::duration<double>(Clock::now() - offered).count();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return grow;
}

void printResults(const Shrink& s, double grow, bool json) {
  if (json) {
    using ds::rounded;
    ds::printJsonLine({{"shrink_s", rounded(s.first, 3)},
                       {"grow_s", rounded(grow, 3)},
                       {"detect_s", rounded(s.detect, 3)},
                       {"restart_s", rounded(s.restart, 3)},
                       {"reload_s", rounded(s.reload, 3)},
                       {"first_step_s", rounded(s.first, 3)}});
    return;
  }
  std::printf("bench_elastic: GPT 4x256 (3.3M parameters), 3 loopback nodes x 2 ranks -> 2 x 2, "
              "ZeRO 2, bf16; both ranks of one node SIGKILLed\n"
              "  detect (node dropped)          %6.2f s\n"
              "  restart (new processes)        %6.2f s\n"
              "  reload (resumed from step %d)  %6.2f s\n"
              "  first step at the new size     %6.2f s\n"
              "shrink: %.2f s (target: under 5 s; TorchElastic restarts take 30 s and more)\n"
              "grow: %.2f s from ds-worker --join to the first step at 6 ranks (--rescale_now; "
              "target: under 5 s)\n",
              s.detect, s.restart, s.resumedAt, s.reload, s.first, s.first, grow);
}

int run(bool json) {
  const ds::bench::GptJobDir scratch("bench-elastic", 300, 1000, 31);
  const ElasticJob job = startJob(scratch.path);
  const Shrink shrink = measureShrink(job, killThirdNode(job));
  const double grow = measureGrow(job);
  ::kill(job.process.pid, SIGTERM);  // ds-launch ends its ranks
  ds::waitForExit(job.process.pid);
  if (grow < 0) throw ds::Error("the job did not grow after the join:\n" + readAll(job.dir / "err"));
  printResults(shrink, grow, json);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return ds::guardedMain("bench_elastic", [&] {
    bool json = false;
    CLI::App app{
        "bench_elastic: how long an elastic GPT job takes to shrink after a node dies "
        "and to grow when it joins again"};
    app.add_flag("--json", json, "print one JSON line");
    if (auto status = ds::parseCommandLine(app, argc, argv)) return *status;
    return run(json);
  });
}
