// ds-launch with external programs and the control-plane features, end to end with real
// processes over loopback: DeepSpeed's per-rank environment, exit status propagation, dry-run
// output, per-rank logs, stall detection, SIGUSR1, --no_ssh, and mutual TLS.
#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <thread>

#include "test/launch_harness.h"
#include "test/skip.h"
#include "test/tls_certificates.h"

using namespace ds::test;
using namespace std::chrono_literals;

namespace {

const char* kHostfile = "127.0.0.1 slots=2\n127.0.0.2 slots=2\n";
const char* kConfig =
    R"({"train_micro_batch_size_per_gpu": 8, "steps_per_print": 1,
        "optimizer": {"type": "Adam", "params": {"lr": 0.01}}})";

// Writes the hostfile and config into a fresh directory and starts ds-launch there.
LaunchedJob launchIn(const std::string& name, const std::vector<std::string>& args) {
  const std::string dir = makeScratchDir(name);
  writeFile(dir + "/hostfile", kHostfile);
  writeFile(dir + "/config.json", kConfig);
  std::vector<std::string> all = {"--hostfile", "hostfile",  "--master_port",
                                  "0",          "--log_dir", "logs"};
  all.insert(all.end(), args.begin(), args.end());
  return startLaunch(dir, all);
}

int run(const std::string& command) { return WEXITSTATUS(std::system(command.c_str())); }

}  // namespace

TEST_CASE("program: every rank gets DeepSpeed's environment and --local_rank") {
  const std::string dir = makeScratchDir("env");
  writeFile(dir + "/hostfile", kHostfile);
  writeFile(dir + "/show.py",
            "import os, sys\n"
            "keys = ('RANK', 'LOCAL_RANK', 'WORLD_SIZE', 'LOCAL_SIZE', 'CROSS_RANK', 'CROSS_SIZE',"
            " 'MASTER_ADDR')\n"
            "secret = any('JOB_TOKEN' in k for k in os.environ)\n"
            "print('ENV', *[os.environ.get(k) for k in keys], 'TOKEN' if secret else 'NOTOKEN',"
            " sys.argv[1:])\n");
  auto job = startLaunch(dir, {"-H", "hostfile", "--master_port", "0", "--log_dir", "logs",
                               "--print_all_ranks", "show.py", "--flag"});
  REQUIRE(waitExit(job, 60s) == 0);
  const std::string out = readFile(job.dir + "/stdout");
  // rank, local rank, world, local size, node rank, nodes; the secret never reaches the program.
  for (const char* expected :
       {"[rank 0] ENV 0 0 4 2 0 2 127.0.0.1 NOTOKEN ['--local_rank=0', '--flag']",
        "[rank 1] ENV 1 1 4 2 0 2 127.0.0.1 NOTOKEN ['--local_rank=1', '--flag']",
        "[rank 2] ENV 2 0 4 2 1 2 127.0.0.1 NOTOKEN ['--local_rank=0', '--flag']",
        "[rank 3] ENV 3 1 4 2 1 2 127.0.0.1 NOTOKEN ['--local_rank=1', '--flag']"}) {
    INFO(out);
    REQUIRE(out.find(expected) != std::string::npos);
  }
  REQUIRE(readFile(job.dir + "/logs/rank-3.log").find("ENV 3 1 4") != std::string::npos);

  // python3 -c as the program itself: DeepSpeed would put --local_rank right after the program,
  // so such commands go with --no_local_rank.
  auto inline_ = startLaunch(
      dir, {"-H", "hostfile", "--master_port", "0", "--no_local_rank", "--", "/usr/bin/python3",
            "-c", "import os; print('WORLD', os.environ['WORLD_SIZE'])"});
  REQUIRE(waitExit(inline_, 60s) == 0);
  REQUIRE(readFile(dir + "/stdout").find("[rank 0] WORLD 4") != std::string::npos);
}

TEST_CASE("program: torch.distributed all_reduce over gloo, 4 ranks on 2 loopback nodes") {
  if (skipUnless(std::system("/usr/bin/python3 -c 'import torch.distributed' >/dev/null 2>&1") == 0,
                 "python3-torch is not installed"))
    return;
  const std::string dir = makeScratchDir("torch");
  writeFile(dir + "/hostfile", kHostfile);
  writeFile(
      dir + "/allreduce.py",
      "import argparse, torch, torch.distributed as dist\n"
      "parser = argparse.ArgumentParser()\n"
      "parser.add_argument('--local_rank', type=int)\n"
      "args = parser.parse_args()\n"
      "dist.init_process_group('gloo')\n"
      "t = torch.tensor([float(dist.get_rank() + 1)])\n"
      "dist.all_reduce(t)\n"
      "print('ALLREDUCE', dist.get_rank(), dist.get_world_size(), args.local_rank, t.item())\n"
      "dist.destroy_process_group()\n");
  auto job = startLaunch(dir, {"-H", "hostfile", "--master_port", "0", "--print_all_ranks",
                               "--python", "/usr/bin/python3", "allreduce.py"});
  REQUIRE(waitExit(job, 120s) == 0);
  const std::string out = readFile(dir + "/stdout");
  INFO(out);
  for (const char* expected : {"[rank 0] ALLREDUCE 0 4 0 10.0", "[rank 1] ALLREDUCE 1 4 1 10.0",
                               "[rank 2] ALLREDUCE 2 4 0 10.0", "[rank 3] ALLREDUCE 3 4 1 10.0"})
    REQUIRE(out.find(expected) != std::string::npos);
}

TEST_CASE("program: --no_local_rank, --module and a shell script run unchanged") {
  const std::string dir = makeScratchDir("module");
  writeFile(dir + "/hostfile", "127.0.0.1 slots=1\n");
  writeFile(dir + "/hello_mod.py", "import sys; print('MODULE', sys.argv[1:])\n");
  writeFile(dir + "/hello.sh", "#!/bin/sh\necho SCRIPT \"$@\" rank $RANK\n");
  REQUIRE(run("chmod +x " + dir + "/hello.sh") == 0);
  auto job = startLaunch(dir, {"-H", "hostfile", "--master_port", "0", "--module",
                               "--no_local_rank", "hello_mod", "a"});
  REQUIRE(waitExit(job, 60s) == 0);
  REQUIRE(readFile(dir + "/stdout").find("MODULE ['a']") != std::string::npos);
  auto script = startLaunch(dir, {"-H", "hostfile", "--master_port", "0", "./hello.sh", "b"});
  REQUIRE(waitExit(script, 60s) == 0);
  REQUIRE(readFile(dir + "/stdout").find("SCRIPT --local_rank=0 b rank 0") != std::string::npos);
}

TEST_CASE("program: a failing rank's exit status is ds-launch's, and the others are stopped") {
  const auto started = std::chrono::steady_clock::now();
  const auto job = launchIn("exit3", {"--no_local_rank", "--", "/bin/sh", "-c",
                                      "if [ $RANK = 2 ]; then echo dying; exit 3; fi; sleep 60"});
  REQUIRE(waitExit(job, 30s) == 3);
  REQUIRE(std::chrono::steady_clock::now() - started < 10s);
  const std::string err = readFile(job.dir + "/stderr");
  REQUIRE_THAT(err, Catch::Contains("rank 2 (host 127.0.0.2)") && Catch::Contains("dying"));
  REQUIRE(waitUntil(5s, [&] { return processesMentioning("sleep 60").empty(); }));
}

TEST_CASE("dry-run --json: one object, nothing started, bad input: exit 2, stdout empty") {
  const std::string dir = makeScratchDir("dryrun");
  writeFile(dir + "/hostfile", "worker-0 slots=4\nworker-1 slots=4\nworker-2 slots=2\n");
  writeFile(dir + "/config.json", kConfig);
  auto job =
      startLaunch(dir, {"-H", "hostfile", "--launcher", "pdsh", "-i", "worker-0:1,3@worker-2",
                        "--dry-run", "--json", "train", "--config", "config.json"});
  REQUIRE(waitExit(job, 30s) == 0);
  const auto plan = nlohmann::json::parse(readFile(dir + "/stdout"));
  REQUIRE(plan["world_size"] == 4);
  REQUIRE(plan["resources"] == nlohmann::json::parse(R"([{"host":"worker-0","slots":[1,3]},
                                    {"host":"worker-2","slots":[0,1]}])"));
  REQUIRE(plan["ranks"][1] ==
          nlohmann::json::parse(
              R"({"rank":1,"host":"worker-0","local_rank":1,"slot":3,"node_rank":0})"));
  REQUIRE(plan["backend"] == "pdsh");
  REQUIRE(plan["commands"].size() == 1);
  REQUIRE(plan["commands"][0]["argv"][0] == "pdsh");
  REQUIRE(plan["batch"]["train_batch_size"] == 32);  // micro 8 x 4 ranks
  REQUIRE(readFile(dir + "/stderr").empty());

  for (const std::vector<std::string>& bad : {std::vector<std::string>{"-i", "worker-0:9"},
                                              {"-i", "worker-0", "-e", "worker-1"},
                                              {"--num_gpus", "5"},
                                              {"--launcher", "openmpi", "-i", "worker-0"},
                                              {"--launcher", "nope"}}) {
    std::vector<std::string> args = {"-H", "hostfile", "--dry-run", "--json"};
    args.insert(args.end(), bad.begin(), bad.end());
    args.insert(args.end(), {"train", "--config", "config.json"});
    auto rejected = startLaunch(dir, args);
    REQUIRE(waitExit(rejected, 30s) == 2);
    INFO(bad.front() << " " << bad.back());
    REQUIRE(readFile(dir + "/stdout").empty());
    REQUIRE_THAT(readFile(dir + "/stderr"), Catch::StartsWith("ds-launch: error: "));
  }
}

TEST_CASE("dry-run: a NeoX job of pipe 2 x model 2 x data 2 shows each rank's coordinate") {
  const std::string dir = makeScratchDir("dryrun-grid");
  writeFile(dir + "/hostfile", "127.0.0.1 slots=4\n127.0.0.2 slots=4\n");
  writeFile(dir + "/grid.yml",
            "num-layers: 4\nhidden-size: 64\nnum-attention-heads: 4\nseq-length: 32\n"
            "max-position-embeddings: 32\ntokenizer-type: ByteTokenizer\ndata-path: data/x\n"
            "train-iters: 10\nbatch-size: 2\npipe-parallel-size: 2\nmodel-parallel-size: 2\n");
  auto text = startLaunch(dir, {"-H", "hostfile", "--dry-run", "train", "--config", "grid.yml"});
  REQUIRE(waitExit(text, 30s) == 0);
  const std::string out = readFile(dir + "/stdout");
  INFO(out);
  REQUIRE_THAT(out, Catch::Contains("grid: pipe 2 x data 2 x model 2"));
  REQUIRE_THAT(out, Catch::Contains("slot   pipe data model\n"));
  // DeepSpeed's layout: rank = (pipe x 2 + data) x 2 + model, so the second node is stage 1.
  REQUIRE_THAT(out, Catch::Contains("\n2      127.0.0.1                0      2          2      0    1    0\n"));
  REQUIRE_THAT(out, Catch::Contains("\n5      127.0.0.2                1      1          1      1    0    1\n"));
  REQUIRE_THAT(out, Catch::Contains("x 2 data-parallel replicas"));  // the batch: 2 x 2, not x 8

  auto json = startLaunch(dir, {"-H", "hostfile", "--dry-run", "--json", "train", "--config",
                                "grid.yml"});
  REQUIRE(waitExit(json, 30s) == 0);
  const auto plan = nlohmann::json::parse(readFile(dir + "/stdout"));
  REQUIRE(plan["grid"] == nlohmann::json::parse(R"({"pipe":2,"data":2,"model":2})"));
  REQUIRE(plan["batch"]["train_batch_size"] == 4);
  for (int rank = 0; rank < 8; ++rank) {
    INFO("rank " << rank);
    REQUIRE(plan["ranks"][rank]["pipe"] == rank / 4);
    REQUIRE(plan["ranks"][rank]["data"] == (rank / 2) % 2);
    REQUIRE(plan["ranks"][rank]["model"] == rank % 2);
  }

  // Six ranks are not whole replicas of four: refused before anything starts, with the fix.
  writeFile(dir + "/hostfile", "127.0.0.1 slots=3\n127.0.0.2 slots=3\n");
  auto six = startLaunch(dir, {"-H", "hostfile", "--dry-run", "train", "--config", "grid.yml"});
  REQUIRE(waitExit(six, 30s) == 2);
  REQUIRE_THAT(readFile(dir + "/stderr"),
               Catch::Contains("world size 6 is not a multiple of pipe-parallel-size x "
                               "model-parallel-size") &&
                   Catch::Contains("run 4, 8, 12"));
}

TEST_CASE("dry-run: a NeoX job with sequence_parallel_size 2 on 4 ranks shows each rank's data and "
          "sequence coordinate") {
  const std::string dir = makeScratchDir("dryrun-ulysses");
  writeFile(dir + "/hostfile", "127.0.0.1 slots=2\n127.0.0.2 slots=2\n");
  writeFile(dir + "/ulysses.yml",
            "num-layers: 2\nhidden-size: 64\nnum-attention-heads: 4\nseq-length: 32\n"
            "max-position-embeddings: 32\ntokenizer-type: ByteTokenizer\ndata-path: data/x\n"
            "train-iters: 10\nbatch-size: 2\nsequence_parallel_size: 2\n");
  auto text = startLaunch(dir, {"-H", "hostfile", "--dry-run", "train", "--config", "ulysses.yml"});
  REQUIRE(waitExit(text, 30s) == 0);
  const std::string out = readFile(dir + "/stdout");
  INFO(out);
  REQUIRE_THAT(out, Catch::Contains("grid: data 2 x sequence 2 (DeepSpeed-Ulysses"));
  REQUIRE_THAT(out, Catch::Contains("slot   data sequence\n"));
  REQUIRE_THAT(out, Catch::Contains("\n3      127.0.0.2                1      1          1      1    1\n"));
  REQUIRE_THAT(out, Catch::Contains("batch: train_batch_size 4 = micro 2 x gradient accumulation 1 "
                                    "x 2 data-parallel replicas"));
  auto json = startLaunch(dir, {"-H", "hostfile", "--dry-run", "--json", "train", "--config",
                                "ulysses.yml"});
  REQUIRE(waitExit(json, 30s) == 0);
  const auto plan = nlohmann::json::parse(readFile(dir + "/stdout"));
  REQUIRE(plan["grid"] == nlohmann::json::parse(R"({"data":2,"sequence":2})"));
  for (int rank = 0; rank < 4; ++rank) {
    REQUIRE(plan["ranks"][rank]["data"] == rank / 2);
    REQUIRE(plan["ranks"][rank]["sequence"] == rank % 2);
  }
  // Heads that do not divide: refused before anything starts, naming the keys.
  writeFile(dir + "/ulysses.yml",
            "num-layers: 2\nhidden-size: 64\nnum-attention-heads: 4\nseq-length: 32\n"
            "max-position-embeddings: 32\ntokenizer-type: ByteTokenizer\ndata-path: data/x\n"
            "train-iters: 10\nbatch-size: 2\nsequence_parallel_size: 3\n");
  writeFile(dir + "/hostfile", "127.0.0.1 slots=3\n");
  auto bad = startLaunch(dir, {"-H", "hostfile", "--dry-run", "train", "--config", "ulysses.yml"});
  REQUIRE(waitExit(bad, 30s) == 2);
  REQUIRE_THAT(readFile(dir + "/stderr"),
               Catch::Contains("sequence_parallel_size 3: num-attention-heads 4 does not divide"));
}

TEST_CASE("each-rank logs: --enable_each_rank_log DIR writes DeepSpeed-named per-rank logs") {
  const auto job = launchIn("eachlog", {"--enable_each_rank_log", "ranklogs", "--no_local_rank",
                                        "--", "/bin/sh", "-c", "echo hello from $RANK"});
  const auto status = waitExit(job, 60s);
  INFO(readFile(job.dir + "/stdout") << readFile(job.dir + "/stderr"));
  REQUIRE(status == 0);
  int found = 0;
  for (const auto& entry : std::filesystem::directory_iterator(job.dir + "/ranklogs")) {
    std::smatch match;
    const std::string name = entry.path().filename().string();
    REQUIRE(std::regex_match(name, match, std::regex(R"(\d{14}_rank(\d)\.log)")));
    REQUIRE(readFile(entry.path()).find("hello from " + match[1].str()) != std::string::npos);
    ++found;
  }
  REQUIRE(found == 4);
}

TEST_CASE("a rank whose step stops advancing is reported as stalled, with its phase") {
  const auto started = std::chrono::steady_clock::now();
  const auto job = launchIn(
      "stall", {"--stall_timeout", "1.5", "--heartbeat_interval", "0.2", "train", "--config",
                "config.json", "--steps", "100000", "--hang_at_step", "20", "--hang_rank", "1"});
  REQUIRE(waitExit(job, 60s) == 1);
  const std::string err = readFile(job.dir + "/stderr");
  // The other ranks wait for it in the stop-vote all_reduce, as their heartbeats say (the
  // collective their communicators are in): the blame is rank 1's, the one outside any.
  REQUIRE_THAT(err, Catch::Contains("rank 1 (host 127.0.0.1) stalled") &&
                        Catch::Contains("hanging") && Catch::Contains(", in all_reduce on world"));
  REQUIRE(std::chrono::steady_clock::now() - started < 30s);
}

TEST_CASE("SIGUSR1 to ds-launch prints every rank's state, the job carries on") {
  const auto job = launchIn("usr1", {"--heartbeat_interval", "0.2", "train", "--config",
                                     "config.json", "--steps", "100000"});
  REQUIRE(waitUntil(
      30s, [&] { return readFile(job.dir + "/stdout").find("step 2/") != std::string::npos; }));
  // A dump shows what the coordinator last heard; ask until one shows a rank of 127.0.0.2 in the
  // training state (its first heartbeat with that state may still be on its way).
  int asked = 0;
  REQUIRE(waitUntil(15s, [&] {
    if (asked++ % 10 == 0) kill(job.pid, SIGUSR1);
    const std::string err = readFile(job.dir + "/stderr");
    return err.find("state of every rank") != std::string::npos &&
           std::regex_search(err, std::regex(R"(127\.0\.0\.2 +training)"));
  }));
  REQUIRE(processExists(job.pid));
  kill(job.pid, SIGTERM);
  REQUIRE(waitExit(job, 10s) == 128 + SIGTERM);
}

TEST_CASE("no-ssh mode: --no_ssh, one ds-launch per node, sharing DS_JOB_TOKEN") {
  const std::string dir0 = makeScratchDir("nossh0"), dir1 = makeScratchDir("nossh1");
  for (const auto& dir : {dir0, dir1}) {
    writeFile(dir + "/hostfile", kHostfile);
    writeFile(dir + "/config.json", kConfig);
  }
  const int port = 20000 + getpid() % 20000;
  setenv("DS_JOB_TOKEN", "0123456789abcdef0123456789abcdef", 1);
  std::vector<std::string> common = {
      "-H",        "hostfile",      "--no_ssh",          "--master_addr",
      "127.0.0.1", "--master_port", std::to_string(port)};
  auto args0 = common, args1 = common;
  args0.insert(args0.end(), {"--node_rank", "0", "--print_all_ranks", "train", "--config",
                             "config.json", "--steps", "20"});
  args1.insert(args1.end(), {"--node_rank", "1", "train", "--config", "config.json"});
  auto node0 = startLaunch(dir0, args0);
  auto node1 = startLaunch(dir1, args1);
  const auto status0 = waitExit(node0, 60s);
  const auto status1 = waitExit(node1, 60s);
  unsetenv("DS_JOB_TOKEN");
  INFO("node 0:\n" << readFile(dir0 + "/stdout") << readFile(dir0 + "/stderr") << "node 1:\n"
                    << readFile(dir1 + "/stdout") << readFile(dir1 + "/stderr"));
  REQUIRE(status0 == 0);
  REQUIRE(status1 == 0);
  // Node 1's ranks print on node 1; node 0's ds-launch supervises all four.
  REQUIRE(readFile(dir1 + "/stdout").find("[rank 2] ") != std::string::npos);
  REQUIRE(readFile(dir0 + "/stdout").find("[rank 0] step 20/20") != std::string::npos);
  REQUIRE_THAT(readFile(dir0 + "/stdout"), Catch::Contains("3     127.0.0.2        0"));
}

TEST_CASE("mutual TLS: --tls-cert/--tls-key/--tls-ca: the whole job runs over mutual TLS") {
  const std::string dir = makeScratchDir("tls");
  ds::test::makeCertificates(dir, "job");
  writeFile(dir + "/hostfile", "127.0.0.1 slots=2\n");
  writeFile(dir + "/config.json", kConfig);
  auto job = startLaunch(dir, {"-H", "hostfile", "--master_port", "0", "--tls-cert", "job-cert.pem",
                               "--tls-key", "job-key.pem", "--tls-ca", "job-ca.pem", "train",
                               "--config", "config.json", "--steps", "5"});
  REQUIRE(waitExit(job, 60s) == 0);
  REQUIRE_THAT(readFile(dir + "/stdout"),
               Catch::Contains("(mutual TLS)") && Catch::Contains("[rank 0] step 5/5"));
  auto partial = startLaunch(
      dir, {"-H", "hostfile", "--tls-cert", "job-cert.pem", "train", "--config", "config.json"});
  REQUIRE(waitExit(partial, 30s) == 2);
  REQUIRE_THAT(readFile(dir + "/stderr"), Catch::Contains("go together"));
}

TEST_CASE("one-node jobs train over shared memory with identical replicas") {
  const std::string dir = makeScratchDir("shm-train");
  writeFile(dir + "/hostfile", "localhost slots=3\n");
  writeFile(dir + "/config.json", kConfig);
  auto job = startLaunch(dir, {"-H", "hostfile", "--master_port", "0", "--log_dir", "logs", "train",
                               "--config", "config.json", "--steps", "30", "--print_param_hash"});
  REQUIRE(waitExit(job, 60s) == 0);
  REQUIRE_THAT(readFile(dir + "/stdout"), Catch::Contains("collectives: shared memory"));
  std::string hash0;
  for (int r = 0; r < 3; ++r) {
    std::smatch match;
    const std::string log = readFile(dir + "/logs/rank-" + std::to_string(r) + ".log");
    REQUIRE(std::regex_search(log, match, std::regex(R"(step 30 param_hash ([0-9a-f]+))")));
    if (r == 0) hash0 = match[1];
    REQUIRE(match[1] == hash0);
  }
}

TEST_CASE("ds-comm-bench --json --check: one JSON object per size from rank 0, results verified") {
  for (const char* hostfile : {"localhost slots=3\n", kHostfile}) {  // shared memory, then Gloo
    const std::string dir = makeScratchDir("comm-bench");
    writeFile(dir + "/hostfile", hostfile);
    for (const char* op : {"all_reduce", "all_gather", "reduce_scatter", "broadcast"})
      for (const char* dtype : {"fp32", "bf16", "fp16"}) {
        auto job = startLaunch(dir, {"-H",
                                     "hostfile",
                                     "--master_port",
                                     "0",
                                     "--log_dir",
                                     "logs",
                                     "ds-comm-bench",
                                     "--op",
                                     op,
                                     "--dtype",
                                     dtype,
                                     "--min",
                                     "1K",
                                     "--max",
                                     "8K",
                                     "--iters",
                                     "3",
                                     "--warmup",
                                     "1",
                                     "--check",
                                     "--json"});
        REQUIRE(waitExit(job, 60s) == 0);
        // Rank 0's own output is only the JSON lines.
        std::vector<nlohmann::json> lines;
        std::istringstream log(readFile(dir + "/logs/rank-0.log"));
        for (std::string line; std::getline(log, line);)
          lines.push_back(nlohmann::json::parse(line));
        INFO(hostfile << op << dtype);
        REQUIRE(lines.size() == 4);  // 1K, 2K, 4K, 8K
        for (size_t i = 0; i < lines.size(); ++i) {
          REQUIRE(lines[i]["op"] == op);
          REQUIRE(lines[i]["dtype"] == dtype);
          REQUIRE(lines[i]["bytes"] == 1024 << i);
          REQUIRE(lines[i]["ranks"] ==
                  (std::string(hostfile).find("slots=3") != std::string::npos ? 3 : 4));
          REQUIRE(lines[i]["time_us"].get<double>() > 0);
          REQUIRE(lines[i]["busbw_GBps"].is_number());
          REQUIRE(lines[i]["check"] == true);
        }
      }
  }
}

TEST_CASE("comms_logger in the config: ds-launch prints the merged table at the end") {
  const std::string dir = makeScratchDir("comms-log");
  writeFile(dir + "/hostfile", "localhost slots=2\n");
  writeFile(dir + "/config.json",
            R"({"train_micro_batch_size_per_gpu": 8, "steps_per_print": 100,
                "comms_logger": {"enabled": true}})");
  auto job = startLaunch(dir, {"-H", "hostfile", "--master_port", "0", "--log_dir", "logs", "train",
                               "--config", "config.json", "--steps", "25"});
  REQUIRE(waitExit(job, 60s) == 0);
  const std::string out = readFile(dir + "/stdout");
  INFO(out);
  REQUIRE_THAT(out, Catch::Contains("communication (comms_logger)"));
  // Two 4-byte all_reduces per step on every rank: the stop vote and the gradient norm's partial
  // sums; the gradients themselves: one 21.5 KiB all_reduce (stage 0, one bucket) per step, and
  // none at the start (each rank draws its own initial values: partitioned construction). All on
  // the world group, whose two ranks are the n of the bus bandwidth.
  REQUIRE(std::regex_search(out, std::regex(R"(all_reduce +world +4 B +50 )")));
  REQUIRE(std::regex_search(out, std::regex(R"(all_reduce +world +21\.5 KiB +25 )")));
}

TEST_CASE("wall_clock_breakdown and dump_state print DeepSpeed's timer line and the engine state") {
  const std::string dir = makeScratchDir("breakdown");
  writeFile(dir + "/hostfile", "localhost slots=2\n");
  writeFile(dir + "/config.json",
            R"({"train_micro_batch_size_per_gpu": 8, "steps_per_print": 5,
                "wall_clock_breakdown": true, "dump_state": true, "bf16": {"enabled": true},
                "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0}})");
  auto job = startLaunch(dir, {"-H", "hostfile", "--master_port", "0", "--log_dir", "logs", "train",
                               "--config", "config.json", "--steps", "10"});
  REQUIRE(waitExit(job, 60s) == 0);
  const std::string out = readFile(dir + "/stdout");
  INFO(out);
  REQUIRE_THAT(out, Catch::Contains("[rank 0] engine state (dump_state):"));
  REQUIRE_THAT(out, Catch::Contains("[rank 0] zero_stage: 3"));
  REQUIRE_THAT(out,
               Catch::Contains("[rank 0] dtypes: model bf16, gradients bf16, communication bf16"));
  // Steps 1, 5 and 10 print a timer line each.
  const std::regex timer(
      R"(\[rank 0\] time \(ms\) \| forward: [0-9.]+ \| backward: [0-9.]+ \| backward_allreduce: [0-9.]+ \| step: [0-9.]+)");
  REQUIRE(std::distance(std::sregex_iterator(out.begin(), out.end(), timer),
                        std::sregex_iterator()) == 3);
  // The ZeRO stage 3 optimizer's own line after each of the 10 updates, on rank 0 only.
  const std::regex optimizer(R"(\[rank (\d+)\] time \(ms\) \| optimizer_step: ([0-9.]+)\n)");
  size_t optimizerLines = 0;
  for (std::sregex_iterator it(out.begin(), out.end(), optimizer), end; it != end; ++it) {
    CHECK((*it)[1] == "0");
    CHECK(std::stod((*it)[2]) >= 0.0);
    ++optimizerLines;
  }
  CHECK(optimizerLines == 10);
  CHECK(out.find("optimizer_swap") == std::string::npos);  // nothing is swapped here
}

TEST_CASE("comm backend forced per job: gloo on one host works, shm across hosts is refused") {
  const std::string dir = makeScratchDir("backend-choice");
  writeFile(dir + "/local", "localhost slots=2\n");
  writeFile(dir + "/two", kHostfile);
  auto gloo = startLaunch(dir, {"-H", "local", "--master_port", "0", "ds-comm-bench", "--backend",
                                "gloo", "--min", "1K", "--max", "2K", "--check"});
  REQUIRE(waitExit(gloo, 60s) == 0);
  REQUIRE_THAT(readFile(dir + "/stdout"), Catch::Contains("2 ranks, gloo (tcp)"));
  auto shm = startLaunch(dir, {"-H", "two", "--master_port", "0", "ds-comm-bench", "--backend",
                               "shm", "--min", "1K", "--max", "2K"});
  REQUIRE(waitExit(shm, 60s) == 1);
  REQUIRE_THAT(readFile(dir + "/stderr"),
               Catch::Contains("needs every rank of a group on one host"));
}
