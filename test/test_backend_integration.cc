// The multi-node backends, each starting the real thing on this machine: a private sshd on
// 127.0.0.2/127.0.0.3 (ssh and pdsh), OpenMPI's mpirun, and a one-node Slurm cluster (srun and an
// sbatch job script). A test skips (exit 77, counted as skipped by CTest) only when its tools are
// not installed.
#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "test/launch_harness.h"
#include "test/skip.h"

using namespace ds::test;
using namespace std::chrono_literals;

namespace {

const std::string kFixtures = std::string(DS_SOURCE_DIR) + "/test/fixtures";
const char* kConfig =
    R"({"train_micro_batch_size_per_gpu": 8, "steps_per_print": 1,
        "optimizer": {"type": "Adam", "params": {"lr": 0.01}}})";

bool installed(const char* program) {
  return std::system(("command -v " + std::string(program) + " >/dev/null 2>&1").c_str()) == 0;
}

// A private sshd for the test's lifetime; PATH gets its ssh wrapper (client config) first, so
// ds-launch's plain `ssh` and pdsh's ssh both use it.
struct PrivateSshd {
  std::string dir;
  std::string oldPath = std::getenv("PATH");
  bool up = false;
  explicit PrivateSshd(const std::string& scratch) : dir(scratch + "/sshd") {
    up = std::system((kFixtures + "/start-sshd.sh " + dir + " 127.0.0.2 127.0.0.3 >" + scratch +
                      "/sshd.out 2>&1")
                         .c_str()) == 0;
    if (up) setenv("PATH", (dir + "/bin:" + oldPath).c_str(), 1);
  }
  ~PrivateSshd() {
    setenv("PATH", oldPath.c_str(), 1);
    std::system((kFixtures + "/stop-sshd.sh " + dir + " >/dev/null 2>&1").c_str());
  }
};

LaunchedJob trainWith(const std::string& dir, const std::string& hostfile,
                      const std::vector<std::string>& flags, int steps) {
  writeFile(dir + "/hostfile", hostfile);
  writeFile(dir + "/config.json", kConfig);
  std::vector<std::string> args = {"-H", "hostfile", "--master_port", "0", "--log_dir", "logs"};
  args.insert(args.end(), flags.begin(), flags.end());
  args.insert(args.end(), {"train", "--config", "config.json", "--steps", std::to_string(steps)});
  return startLaunch(dir, args);
}

// Every rank logged its last step through the backend's output stream.
void requireAllRanksFinished(const std::string& dir, int ranks, int steps) {
  for (int r = 0; r < ranks; ++r) {
    INFO("rank " << r);
    const std::string log = readFile(dir + "/logs/rank-" + std::to_string(r) + ".log");
    REQUIRE(log.find("step " + std::to_string(steps) + "/" + std::to_string(steps)) !=
            std::string::npos);
  }
}

// SIGKILLs one worker of the job on `host` once it trains, then expects the whole job gone.
void killOneWorkerAndExpectTeardown(const LaunchedJob& job, const std::string& host) {
  const std::string coordinator = coordinatorAddressOf(job, 30s);
  REQUIRE(!coordinator.empty());
  REQUIRE(waitUntil(60s, [&] {
    return readFile(job.dir + "/stdout").find("[rank 0] step 3/") != std::string::npos;
  }));
  // A rank's worker: ds-worker with --host HOST --slot (node agents start those), or any
  // ds-worker started by mpirun/srun (--rank_from_env) when the plan has one host.
  pid_t victim = -1;
  for (pid_t pid : processesMentioning(coordinator)) {
    const std::string cmdline = readFile("/proc/" + std::to_string(pid) + "/cmdline");
    if (cmdline.find("ds-worker") == std::string::npos) continue;
    if (cmdline.find(host + std::string(1, '\0') + "--slot") != std::string::npos ||
        cmdline.find("--rank_from_env") != std::string::npos)
      victim = pid;
  }
  REQUIRE(victim > 0);
  const auto killed = std::chrono::steady_clock::now();
  kill(victim, SIGKILL);
  const auto status = waitExit(job, 20s);
  REQUIRE(status.has_value());
  REQUIRE(*status != 0);
  REQUIRE(std::chrono::steady_clock::now() - killed < 5s);
  REQUIRE_THAT(readFile(job.dir + "/stderr"), Catch::Contains("(host " + host + ")"));
  REQUIRE(waitUntil(5s, [&] { return processesMentioning(coordinator).empty(); }));
}

}  // namespace

TEST_CASE("backend ssh: a node agent per host over a private sshd, a killed rank ends the job") {
  if (skipUnless(installed("/usr/sbin/sshd") && installed("ssh"),
                 "openssh-server/openssh-client are not installed"))
    return;
  const std::string dir = makeScratchDir("ssh");
  PrivateSshd sshd(dir);
  REQUIRE(sshd.up);
  const std::string hostfile = "127.0.0.2 slots=2\n127.0.0.3 slots=2\n";
  auto job = trainWith(dir, hostfile, {"--launcher", "ssh"}, 20);
  REQUIRE(waitExit(job, 60s) == 0);
  requireAllRanksFinished(dir, 4, 20);

  auto doomed = trainWith(makeScratchDir("ssh-kill"), hostfile, {"--launcher", "ssh"}, 1000000);
  killOneWorkerAndExpectTeardown(doomed, "127.0.0.3");
}

TEST_CASE("backend ssh: SIGKILL of ds-launch leaves no remote worker behind") {
  if (skipUnless(installed("/usr/sbin/sshd"), "openssh-server is not installed")) return;
  const std::string dir = makeScratchDir("ssh-orphans");
  PrivateSshd sshd(dir);
  REQUIRE(sshd.up);
  auto job =
      trainWith(dir, "127.0.0.2 slots=2\n127.0.0.3 slots=2\n", {"--launcher", "ssh"}, 1000000);
  const std::string coordinator = coordinatorAddressOf(job, 30s);
  REQUIRE(waitUntil(60s, [&] {
    return readFile(job.dir + "/stdout").find("[rank 0] step 3/") != std::string::npos;
  }));
  REQUIRE(processesMentioning(coordinator).size() >= 4);
  kill(job.pid, SIGKILL);
  waitExit(job, 5s);
  // The workers' command stream breaks with the coordinator: they leave on their own.
  REQUIRE(waitUntil(5s, [&] { return processesMentioning(coordinator).empty(); }));
}

TEST_CASE("backend pdsh: one pdsh over both hosts, %n as node rank") {
  if (skipUnless(installed("pdsh") && installed("/usr/sbin/sshd"),
                 "pdsh or openssh-server is not installed"))
    return;
  const std::string dir = makeScratchDir("pdsh");
  PrivateSshd sshd(dir);
  REQUIRE(sshd.up);
  const std::string hostfile = "127.0.0.2 slots=2\n127.0.0.3 slots=1\n";
  auto job =
      trainWith(dir, hostfile, {"--launcher", "pdsh", "--enable_each_rank_log", "ranklogs"}, 20);
  REQUIRE(waitExit(job, 60s) == 0);
  // Per-rank logs with DeepSpeed's names, from lines that all came through one pdsh stream.
  int logs = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir + "/ranklogs")) {
    const std::string name = entry.path().filename().string();
    const std::string rank = name.substr(name.find("_rank") + 5, 1);
    INFO(name);
    REQUIRE(readFile(entry.path().string()).find("step 20/20") != std::string::npos);
    REQUIRE((rank == "0" || rank == "1" || rank == "2"));
    ++logs;
  }
  REQUIRE(logs == 3);

  auto doomed = trainWith(makeScratchDir("pdsh-kill"), hostfile, {"--launcher", "pdsh"}, 1000000);
  killOneWorkerAndExpectTeardown(doomed, "127.0.0.2");
}

TEST_CASE("backend openmpi: mpirun starts the ranks, workers take them from OMPI_COMM_WORLD_RANK") {
  if (skipUnless(installed("mpirun") && installed("ompi_info"), "openmpi-bin is not installed"))
    return;
  const std::string dir = makeScratchDir("openmpi");
  const std::string hostfile = "localhost slots=4\n";
  const std::vector<std::string> flags = {"--launcher", "openmpi", "--launcher_args",
                                          "--mca btl_tcp_if_include lo"};
  auto job = trainWith(dir, hostfile, flags, 20);
  REQUIRE(waitExit(job, 60s) == 0);
  requireAllRanksFinished(dir, 4, 20);

  auto doomed = trainWith(makeScratchDir("openmpi-kill"), hostfile, flags, 1000000);
  killOneWorkerAndExpectTeardown(doomed, "localhost");
}

namespace {

// A one-node Slurm cluster (munged, slurmctld, slurmd) under a private directory, for the test.
struct PrivateSlurm {
  std::string dir;
  std::string oldConf;
  bool up = false;
  PrivateSlurm() {
    char pattern[] = "/tmp/slurm-XXXXXX";  // short: Slurm's unix socket paths are limited
    dir = mkdtemp(pattern);
    if (const char* conf = std::getenv("SLURM_CONF")) oldConf = conf;
    up = std::system(
             (kFixtures + "/start-slurm.sh " + dir + " >" + dir + "/start.out 2>&1").c_str()) == 0;
    if (up) setenv("SLURM_CONF", (dir + "/slurm.conf").c_str(), 1);
  }
  ~PrivateSlurm() {
    std::system((kFixtures + "/stop-slurm.sh " + dir + " >/dev/null 2>&1").c_str());
    if (oldConf.empty())
      unsetenv("SLURM_CONF");
    else
      setenv("SLURM_CONF", oldConf.c_str(), 1);
    std::filesystem::remove_all(dir);
  }
};

std::string shortHostname() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  std::string host = name;
  return host.substr(0, host.find('.'));
}

}  // namespace

TEST_CASE("backend slurm: srun starts the ranks, and an sbatch job script runs ds-launch") {
  if (skipUnless(installed("slurmctld") && installed("slurmd") && installed("munged"),
                 "slurm-wlm/munge are not installed"))
    return;
  PrivateSlurm slurm;
  if (!slurm.up)
    FAIL("the test's Slurm cluster did not start:\n" + readFile(slurm.dir + "/start.out"));
  const std::string node = shortHostname();
  const std::string dir = makeScratchDir("slurm");
  // 4 tasks on a 2-CPU node: -O (overcommit) lets srun place them.
  auto job =
      trainWith(dir, node + " slots=4\n",
                {"--launcher", "slurm", "--launcher_args", "-O", "--master_addr", "127.0.0.1"}, 20);
  REQUIRE(waitExit(job, 90s) == 0);
  requireAllRanksFinished(dir, 4, 20);
  REQUIRE_THAT(readFile(dir + "/stdout"), Catch::Contains("(slurm)"));

  auto doomed = trainWith(
      makeScratchDir("slurm-kill"), node + " slots=4\n",
      {"--launcher", "slurm", "--launcher_args", "-O", "--master_addr", "127.0.0.1"}, 1000000);
  killOneWorkerAndExpectTeardown(doomed, node);

  // The job script from scripts/, through sbatch, from a submit directory with a config.
  const std::string submit = makeScratchDir("sbatch");
  writeFile(submit + "/config.json", kConfig);
  const std::string command =
      "cd " + submit + " && DS_BIN=" + DS_BIN_DIR +
      " DS_LAUNCH_FLAGS='--launcher_args=-O --master_port 0' timeout 120 sbatch --wait -O -N 1 "
      "-n 3 -o job.out " +
      std::string(DS_SOURCE_DIR) +
      "/scripts/slurm-job.sh train --config config.json --steps 10 > sbatch.out 2>&1";
  const int status = std::system(command.c_str());
  INFO(readFile(submit + "/sbatch.out") + readFile(submit + "/job.out"));
  REQUIRE(WEXITSTATUS(status) == 0);
  const std::string out = readFile(submit + "/job.out");
  REQUIRE_THAT(
      out, Catch::Contains("3 ranks on 1 nodes (slurm)") && Catch::Contains("[rank 0] step 10/10"));
}
