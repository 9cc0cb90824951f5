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

int run(bool json) {
  const ds::bench::GptJobDir scratch("bench-elastic", 300, 1000, 31);
  const fs::path& dir = scratch.path;
  std::ofstream(dir / "hostfile") << "127.0.0.1 slots=2\n127.0.0.2 slots=2\n127.0.0.3 slots=2\n";
  std::ofstream(dir / "gpt.yml")
      << "num-layers: 4\nhidden-size: 256\nnum-attention-heads: 4\nseq-length: 128\n"
         "max-position-embeddings: 128\npos-emb: rotary\ndata-path: data/corpus\n"
         "tokenizer-type: ByteTokenizer\n"
         "split: \"100,0,0\"\ntrain-iters: 2000\neval-iters: 0\nlr: 0.001\nlog-interval: 1\n"
         "save: ckpt\nsave-interval: 5\nprecision: bfloat16\nzero_optimization: {stage: 2}\n"
         "elasticity: {enabled: true, max_train_batch_size: 24, micro_batch_sizes: [1, 2, 3, 4],"
         " min_gpus: 1, max_gpus: 6, version: 0.1}\n";
  const std::string launch = std::string(DS_BIN_DIR) + "/ds-launch";
  const int port = ds::bench::freeLoopbackPort();
  const std::string token = "bench-elastic-token-" + std::to_string(getpid()) + "-0123456789";
  ds::SpawnOptions spawn;
  spawn.argv = {"/bin/sh", "-c",
                "cd " + dir.string() + " && exec " + launch +
                    " --hostfile hostfile --master_port " + std::to_string(port) +
                    " --log_dir logs --elastic_training --rescale_now train --config gpt.yml "
                    "--print_param_hash >out 2>err"};
  spawn.env = {{"DS_JOB_TOKEN", token}};
  spawn.label = "bench_elastic";
  const ds::Spawned job = ds::spawnProcess(spawn);
  const std::regex hash(R"(step (\d+) param_hash)");
  auto lastStep = [&]() {
    const std::string log = readAll(dir / "logs/rank-0.log");
    int last = 0;
    for (std::sregex_iterator it(log.begin(), log.end(), hash), end; it != end; ++it)
      last = std::stoi((*it)[1]);
    return last;
  };
  const auto deadline = Clock::now() + std::chrono::minutes(5);
  auto jobEnded = [&] { return waitpid(job.pid, nullptr, WNOHANG) == job.pid; };
  while (lastStep() < 8 && Clock::now() < deadline) {
    if (jobEnded()) throw ds::Error("the elastic job ended before the kill:\n" + readAll(dir / "err"));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // Both ranks of 127.0.0.3, found by their command lines.
  const std::string pids = [&] {
    FILE* p = popen("pgrep -f 'ds-worker.*127\\.0\\.0\\.3'", "r");
    std::string out;
    char buf[256];
    for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    pclose(p);
    return out;
  }();
  const auto killed = Clock::now();
  std::istringstream list(pids);
  int victims = 0;
  for (int pid; list >> pid;) victims += ::kill(pid, SIGKILL) == 0;
  if (victims == 0) throw ds::Error("found no worker of 127.0.0.3 to kill: " + readAll(dir / "err"));
  double detect = -1, restart = -1, reload = -1, first = -1;
  int resumedAt = -1;
  const std::regex resumed(R"(resumed from \S+/global_step(\d+))");
  while (first < 0 && Clock::now() < deadline) {
    const double t = std::chrono::duration<double>(Clock::now() - killed).count();
    if (detect < 0 && readAll(dir / "err").find("dropping node") != std::string::npos) detect = t;
    const std::string out = readAll(dir / "out");
    if (restart < 0 && out.find("elastic epoch 2") != std::string::npos) restart = t;
    std::smatch m;
    if (reload < 0 && std::regex_search(out, m, resumed)) {
      reload = t;
      resumedAt = std::stoi(m[1]);
    }
    if (resumedAt >= 0 && lastStep() > resumedAt) first = t;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (first < 0) throw ds::Error("the job did not go on after the kill:\n" + readAll(dir / "err"));

  // Grow: the node offers itself back (ds-worker --join) and is taken at once (--rescale_now).
  const auto offered = Clock::now();
  const std::string join = "DS_JOB_TOKEN=" + token + " " + DS_BIN_DIR + "/ds-worker --join 127.0.0.1:" +
                           std::to_string(port) + " --host 127.0.0.3 --slots 2 >/dev/null 2>&1";
  if (std::system(join.c_str()) != 0)
    throw ds::Error("the job did not take the node back:\n" + readAll(dir / "err"));
  double grow = -1;
  int regrownAt = -1;
  while (grow < 0 && Clock::now() < deadline) {
    const std::string out = readAll(dir / "out");
    if (regrownAt < 0 && out.find("elastic epoch 3") != std::string::npos) {
      std::smatch m;
      std::string rest = out.substr(out.find("elastic epoch 3"));
      if (std::regex_search(rest, m, resumed)) regrownAt = std::stoi(m[1]);
    }
    if (regrownAt >= 0 && lastStep() > regrownAt)
      grow = std::chrono::duration<double>(Clock::now() - offered).count();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ::kill(job.pid, SIGTERM);  // ds-launch ends its ranks
  ds::waitForExit(job.pid);
  if (grow < 0) throw ds::Error("the job did not grow after the join:\n" + readAll(dir / "err"));
  if (json) {
    using ds::rounded;
    ds::printJsonLine({{"shrink_s", rounded(first, 3)},
                              {"grow_s", rounded(grow, 3)},
                              {"detect_s", rounded(detect, 3)},
                              {"restart_s", rounded(restart, 3)},
                              {"reload_s", rounded(reload, 3)},
                              {"first_step_s", rounded(first, 3)}});
  } else {
    std::printf("bench_elastic: GPT 4x256 (3.3M parameters), 3 loopback nodes x 2 ranks -> 2 x 2, "
                "ZeRO 2, bf16; both ranks of one node SIGKILLed\n"
                "  detect (node dropped)          %6.2f s\n"
                "  restart (new processes)        %6.2f s\n"
                "  reload (resumed from step %d)  %6.2f s\n"
                "  first step at the new size     %6.2f s\n"
                "shrink: %.2f s (target: under 5 s; TorchElastic restarts take 30 s and more)\n"
                "grow: %.2f s from ds-worker --join to the first step at 6 ranks (--rescale_now; "
                "target: under 5 s)\n",
                detect, restart, resumedAt, reload, first, first, grow);
  }
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
