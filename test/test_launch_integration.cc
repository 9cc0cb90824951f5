// ds-launch end to end with real processes: 2 "nodes" (127.0.0.1 and 127.0.0.2) x 2 ranks.
// Training succeeds with bitwise-identical replicas; a SIGKILLed worker or a SIGTERM to ds-launch
// ends the whole job within 5 s with no process left; a join with a wrong token is refused while
// the job carries on.
#include <signal.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <set>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "test/launch_harness.h"
#include "test/rank_logs.h"
#include "worker/coordinator_client.h"

using namespace ds::test;
using namespace std::chrono_literals;

namespace {

const char* kHostfile = "127.0.0.1 slots=2\n127.0.0.2 slots=2\n";

std::string configJson(int stage, int stepsPerPrint) {
  return R"({"train_micro_batch_size_per_gpu": 8, "gradient_accumulation_steps": 2,
    "steps_per_print": )" +
         std::to_string(stepsPerPrint) + R"(, "gradient_clipping": 1.0,
    "optimizer": {"type": "AdamW", "params": {"lr": 0.01, "weight_decay": 0.01}},
    "zero_optimization": {"stage": )" +
         std::to_string(stage) + "}}";
}

// Every job prints parameter hashes: they double as a per-step progress marker for the tests.
LaunchedJob startTraining(const std::string& name, int stage, int steps,
                          const std::vector<std::string>& launcherFlags = {},
                          const std::vector<std::string>& jobFlags = {},
                          const std::string& existingDir = "") {
  const std::string dir = existingDir.empty() ? makeScratchDir(name) : existingDir;
  writeFile(dir + "/hostfile", kHostfile);
  writeFile(dir + "/config.json", configJson(stage, 1));
  std::vector<std::string> args = {"--hostfile", "hostfile",  "--master_port",
                                   "0",          "--log_dir", "logs"};
  args.insert(args.end(), launcherFlags.begin(), launcherFlags.end());
  args.insert(args.end(), {"train", "--config", "config.json", "--steps", std::to_string(steps),
                           "--print_param_hash"});
  args.insert(args.end(), jobFlags.begin(), jobFlags.end());
  return startLaunch(dir, args);
}

std::vector<double> losses(const std::string& log) {
  std::vector<double> out;
  static const std::regex line(R"(step \d+/\d+ loss ([0-9.]+))");
  for (std::sregex_iterator it(log.begin(), log.end(), line), end; it != end; ++it)
    out.push_back(std::stod((*it)[1]));
  return out;
}

int highestLoggedStep(const std::string& dir) {
  const auto hashes = paramHashes(readFile(dir + "/logs/rank-0.log"));
  return hashes.empty() ? 0 : hashes.rbegin()->first;
}

// The four workers once rank 0 has logged `minStep` steps; empty if that takes over 30 s.
std::vector<WorkerInfo> workersOnceTraining(const LaunchedJob& job, int minStep) {
  std::vector<WorkerInfo> workers;
  const bool ready = waitUntil(30s, [&] {
    workers = findWorkers(job.pid);
    return workers.size() == 4 && highestLoggedStep(job.dir) >= minStep;
  });
  return ready ? workers : std::vector<WorkerInfo>{};
}

// The pid of the worker running `host` slot `slot`, or -1.
pid_t workerPid(const std::vector<WorkerInfo>& workers, const std::string& host, int slot) {
  for (const auto& worker : workers)
    if (worker.host == host && worker.slot == slot) return worker.pid;
  return -1;
}

// Everything /proc/PID/environ shows of a process's environment block.
std::string environmentText(pid_t pid) {
  std::ifstream environment("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(environment), {});
}

}  // namespace

TEST_CASE("launch: 2 nodes x 2 ranks train with identical replicas at ZeRO stages 0-3") {
  for (int stage : {0, 1, 2, 3}) {
    INFO("stage " << stage);
    const auto job = startTraining("train-stage" + std::to_string(stage), stage, 20);
    const auto status = waitExit(job, 120s);
    INFO(readFile(job.dir + "/stdout") << readFile(job.dir + "/stderr"));
    REQUIRE(status == 0);

    std::vector<std::map<int, std::string>> hashes;
    for (int r = 0; r < 4; ++r)
      hashes.push_back(paramHashes(readFile(job.dir + "/logs/rank-" + std::to_string(r) + ".log")));
    REQUIRE(hashes[0].size() == 20);
    for (int r = 1; r < 4; ++r) REQUIRE(hashes[r] == hashes[0]);
    // Parameters change at every step (no frozen replicas passing by accident).
    REQUIRE(hashes[0].at(1) != hashes[0].at(20));

    const auto loss = losses(readFile(job.dir + "/logs/rank-0.log"));
    REQUIRE(loss.size() == 20);
    const double first = (loss[0] + loss[1] + loss[2]) / 3,
                 last = (loss[17] + loss[18] + loss[19]) / 3;
    REQUIRE(last < 0.7 * first);

    const std::string out = readFile(job.dir + "/stdout");
    REQUIRE(out.find("[rank 0] step 20/20") != std::string::npos);
    REQUIRE(out.find("[rank 1]") == std::string::npos);  // only rank 0 on the console by default
    REQUIRE(std::regex_search(out, std::regex(R"(\n3 +127\.0\.0\.2 +0 +20 )")));
  }
}

TEST_CASE(
    "launch: a job saved at step 10 and resumed runs on to step 20 exactly as a straight run") {
  const auto straight = startTraining("resume-straight", 3, 20);
  REQUIRE(waitExit(straight, 120s) == 0);
  const auto first = startTraining("resume", 3, 10, {}, {"--save_dir", "ckpt"});
  INFO(readFile(first.dir + "/stdout") << readFile(first.dir + "/stderr"));
  REQUIRE(waitExit(first, 120s) == 0);
  REQUIRE(readFile(first.dir + "/ckpt/latest") == "global_step10\n");
  // The same directory: the second job resumes from ckpt/latest (its logs replace the first's).
  const auto second =
      startTraining("resume", 3, 20, {}, {"--load_dir", "ckpt", "--save_dir", "ckpt"}, first.dir);
  REQUIRE(waitExit(second, 120s) == 0);
  const std::string out = readFile(second.dir + "/stdout");
  REQUIRE(out.find("resumed from ckpt/global_step10 at step 10") != std::string::npos);
  const auto resumed = paramHashes(readFile(second.dir + "/logs/rank-3.log"));
  const auto reference = paramHashes(readFile(straight.dir + "/logs/rank-3.log"));
  REQUIRE(resumed.count(20) == 1);
  REQUIRE(resumed.at(20) == reference.at(20));
  REQUIRE(resumed.count(5) == 0);  // it did not start over
}

TEST_CASE("launch: SIGKILL of one worker ends the job within 5 s naming that rank") {
  const auto job = startTraining("sigkill", 1, 1000000);
  const auto workers = workersOnceTraining(job, 5);
  REQUIRE(workers.size() == 4);
  const pid_t victim = workerPid(workers, "127.0.0.2", 0);  // rank 2
  REQUIRE(victim > 0);
  ::kill(victim, SIGKILL);
  const auto killedAt = std::chrono::steady_clock::now();
  const auto status = waitExit(job, 10s);
  const auto took = std::chrono::steady_clock::now() - killedAt;
  const std::string err = readFile(job.dir + "/stderr");
  INFO(err);
  REQUIRE(status);
  REQUIRE(*status == 128 + SIGKILL);
  REQUIRE(took < 5s);
  REQUIRE(err.find("rank 2 (host 127.0.0.2) killed by signal 9") != std::string::npos);
  REQUIRE(err.find("last lines of rank 2") != std::string::npos);
  for (const auto& worker : workers) REQUIRE_FALSE(processExists(worker.pid));
}

// Whether `pid` has loaded the worker's gRPC side (only a relay host, or a direct worker, does).
bool mapsGrpc(pid_t pid) {
  return readFile("/proc/" + std::to_string(pid) + "/maps").find("libds-worker-grpc.so") !=
         std::string::npos;
}

// TCP connections of `pid` to `port` on the peer side, from its descriptors and /proc/net/tcp.
int connectionsTo(pid_t pid, int port) {
  std::set<std::string> inodes;
  std::error_code ignored;
  for (const auto& fd :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ignored)) {
    const std::string target = std::filesystem::read_symlink(fd.path(), ignored).string();
    if (target.rfind("socket:[", 0) == 0) inodes.insert(target.substr(8, target.size() - 9));
  }
  int count = 0;
  char hexPort[8];
  std::snprintf(hexPort, sizeof hexPort, "%04X", port);
  // gRPC's sockets are IPv6 ones (IPv4-mapped) where the kernel allows: both tables.
  for (const char* path : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::istringstream table(readFile(path));
    std::string line;
    std::getline(table, line);  // the header
    while (std::getline(table, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout, inode;
      fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >>
          timeout >> inode;
      if (state == "01" && remote.substr(remote.find(':') + 1) == hexPort && inodes.count(inode))
        ++count;
    }
  }
  return count;
}

TEST_CASE("launch: one coordinator connection per node, held by the worker that hosts its relay, "
          "and killing that worker ends the job naming it") {
  const auto job = startTraining("relayhost", 0, 1000000);
  const auto workers = workersOnceTraining(job, 3);
  REQUIRE(workers.size() == 4);
  const std::string address = coordinatorAddressOf(job, 10s);
  REQUIRE_FALSE(address.empty());
  const int port = std::stoi(address.substr(address.rfind(':') + 1));
  std::map<std::string, std::vector<pid_t>> hosts;
  for (const auto& worker : workers) {
    INFO("worker " << worker.pid << " on " << worker.host << " slot " << worker.slot);
    if (mapsGrpc(worker.pid)) {
      hosts[worker.host].push_back(worker.pid);
      CHECK(connectionsTo(worker.pid, port) == 1);
    } else {
      CHECK(connectionsTo(worker.pid, port) == 0);  // behind the relay, without gRPC
    }
  }
  REQUIRE(hosts["127.0.0.1"].size() == 1);
  REQUIRE(hosts["127.0.0.2"].size() == 1);

  const pid_t victim = hosts["127.0.0.2"].front();
  int rank = -1;
  for (const auto& worker : workers)
    if (worker.pid == victim) rank = 2 + worker.slot;
  ::kill(victim, SIGKILL);
  const auto status = waitExit(job, 10s);
  const std::string err = readFile(job.dir + "/stderr");
  INFO(err);
  REQUIRE(status == 128 + SIGKILL);
  CHECK(err.find("rank " + std::to_string(rank) + " (host 127.0.0.2) killed by signal 9") !=
        std::string::npos);
  for (const auto& worker : workers) CHECK_FALSE(processExists(worker.pid));
}

TEST_CASE("launch: SIGTERM to ds-launch stops every worker within 5 s") {
  const auto job = startTraining("sigterm", 0, 1000000);
  const auto workers = workersOnceTraining(job, 2);
  REQUIRE(workers.size() == 4);
  ::kill(job.pid, SIGTERM);
  const auto status = waitExit(job, 5s);
  REQUIRE(status == 128 + SIGTERM);
  REQUIRE(readFile(job.dir + "/stderr").find("interrupted by SIGTERM") != std::string::npos);
  for (const auto& worker : workers) REQUIRE_FALSE(processExists(worker.pid));
}

TEST_CASE("launch: a join with a wrong token is refused and the job finishes unaffected") {
  // The token given to ds-launch in its environment; workers must not keep it readable.
  const std::string token = "badtoken-test-" + std::to_string(getpid()) + "-0123456789abcdef";
  setenv("DS_JOB_TOKEN", token.c_str(), 1);
  const auto job = startTraining("badtoken", 1, 300);
  unsetenv("DS_JOB_TOKEN");
  const auto workers = workersOnceTraining(job, 3);
  REQUIRE(workers.size() == 4);
  const std::string out = readFile(job.dir + "/stdout");
  std::smatch match;
  REQUIRE(std::regex_search(out, match, std::regex(R"(coordinator (127\.0\.0\.1:\d+))")));
  for (const auto& worker : workers)
    REQUIRE(environmentText(worker.pid).find(token) == std::string::npos);  // /proc/PID/environ
  REQUIRE(processesMentioning(token).empty());  // on no command line, so never in ps

  std::string wrong = token;
  wrong[10] = wrong[10] == 'a' ? 'b' : 'a';
  ds::worker::CoordinatorClient intruder(match[1], wrong);
  REQUIRE_THROWS_WITH(intruder.join({"127.0.0.2", 1}, 5s), Catch::Contains("wrong job token"));
  // The right token cannot take over a slot that is already running either.
  ds::worker::CoordinatorClient twin(match[1], token);
  REQUIRE_THROWS_WITH(twin.join({"127.0.0.2", 1}, 5s), Catch::Contains("already joined"));

  const auto status = waitExit(job, 120s);
  REQUIRE(status == 0);
  REQUIRE(highestLoggedStep(job.dir) == 300);
  const std::string err = readFile(job.dir + "/stderr");
  REQUIRE(err.find("refused Join") != std::string::npos);
  REQUIRE(err.find("wrong job token") != std::string::npos);
}

TEST_CASE("launch: SIGKILL of ds-launch itself leaves no worker behind") {
  const auto job = startTraining("killlauncher", 0, 1000000);
  const auto workers = workersOnceTraining(job, 2);
  REQUIRE(workers.size() == 4);
  ::kill(job.pid, SIGKILL);
  REQUIRE(waitExit(job, 5s) == 128 + SIGKILL);
  // Workers get SIGKILL as their parent-death signal; remote ones would see the command stream
  // break instead (covered by the coordinator tests).
  REQUIRE(waitUntil(5s, [&] {
    return std::none_of(workers.begin(), workers.end(),
                        [](const WorkerInfo& w) { return processExists(w.pid); });
  }));
}

TEST_CASE("launch: a SIGSTOPped worker is detected by its missing heartbeats and the job ends") {
  const auto job = startTraining("sigstop", 0, 1000000,
                                 {"--heartbeat_interval", "0.2", "--heartbeat_timeout", "1.5"});
  const auto workers = workersOnceTraining(job, 3);
  REQUIRE(workers.size() == 4);
  const pid_t victim = workerPid(workers, "127.0.0.1", 1);  // rank 1
  REQUIRE(victim > 0);
  ::kill(victim, SIGSTOP);
  const auto stoppedAt = std::chrono::steady_clock::now();
  const auto status = waitExit(job, 15s);
  const auto took = std::chrono::steady_clock::now() - stoppedAt;
  const std::string err = readFile(job.dir + "/stderr");
  INFO(err);
  REQUIRE(status == 1);
  REQUIRE(err.find("rank 1 (host 127.0.0.1) stopped heartbeating") != std::string::npos);
  // Timeout 1.5 s, plus up to one interval of heartbeat age and the abort grace.
  REQUIRE(took > 1400ms);
  REQUIRE(took < 5s);
  for (const auto& worker : workers) REQUIRE_FALSE(processExists(worker.pid));
}

TEST_CASE(
    "launch: a heartbeat timeout shorter than two intervals is refused before anything starts") {
  const std::string dir = makeScratchDir("hbflags");
  writeFile(dir + "/hostfile", kHostfile);
  writeFile(dir + "/config.json", configJson(0, 1));
  const auto job =
      startLaunch(dir, {"--hostfile", "hostfile", "--heartbeat_interval", "1",
                        "--heartbeat_timeout", "1.5", "train", "--config", "config.json"});
  REQUIRE(waitExit(job, 10s) == 2);
  REQUIRE(readFile(dir + "/stderr").find("at least twice --heartbeat_interval") !=
          std::string::npos);
  REQUIRE(readFile(dir + "/stdout").empty());
}
