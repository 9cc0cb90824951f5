// ds-launch: plan the job from the hostfile, start the coordinator, start one ds-worker per rank,
// supervise until the job ends, print the summary. Exit 0 only when every rank succeeded.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <ctime>
#include <iostream>
#include <random>
#include <sstream>
#include <thread>

#include "launcher/coordinator.h"
#include "launcher/hostfile.h"
#include "launcher/job_supervisor.h"
#include "launcher/launch_plan.h"
#include "launcher/worker_process.h"
#include "runtime/common/error.h"
#include "runtime/config/ds_config.h"

namespace {

using namespace ds::launcher;

constexpr int kUsageError = 2;

std::string randomToken() {
  std::random_device device;  // /dev/urandom on Linux
  std::ostringstream hex;
  for (int i = 0; i < 8; ++i) {  // 8 x 32 bits = 256 bits
    char buffer[9];
    std::snprintf(buffer, sizeof(buffer), "%08x", device());
    hex << buffer;
  }
  return hex.str();
}

std::string defaultLogDir() {
  char stamp[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", std::localtime(&now));
  return std::string("ds_logs/") + stamp + "-" + std::to_string(getpid());
}

// The config file named by the job's --config / --deepspeed_config argument, if any.
std::string configPathOf(const std::vector<std::string>& jobArgs) {
  for (size_t i = 1; i < jobArgs.size(); ++i) {
    for (const std::string flag : {"--config", "--deepspeed_config"}) {
      if (jobArgs[i] == flag && i + 1 < jobArgs.size()) return jobArgs[i + 1];
      if (jobArgs[i].starts_with(flag + "=")) return jobArgs[i].substr(flag.size() + 1);
    }
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ds-launch: start a distributed training job (DeepSpeed-compatible flags)"};
  std::string hostfile = "/job/hostfile";
  PlanRequest planRequest;
  std::string masterAddr;
  int masterPort = 29500;
  std::string logDir;
  bool printAllRanks = false;
  double heartbeatInterval = 1.0, heartbeatTimeout = 10.0;
  app.add_option(
         "-H,--hostfile", hostfile,
         "MPI-style hostfile ('host slots=N'); if missing, localhost with one rank per core")
      ->capture_default_str();
  app.add_option("--num_nodes", planRequest.numNodes, "use the first N hosts of the hostfile");
  app.add_option("--num_gpus,--num_accelerators", planRequest.numGpus,
                 "use the first N slots of every host");
  app.add_option("--master_addr", masterAddr,
                 "address the coordinator listens on (default: the first host)");
  app.add_option("--master_port", masterPort, "coordinator port (0: any free port)")
      ->capture_default_str();
  app.add_option("--log_dir", logDir,
                 "directory for rank-N.log files (default: ds_logs/<time>-<pid>)");
  app.add_flag("--print_all_ranks", printAllRanks, "show every rank's output, not only rank 0's");
  app.add_option("--heartbeat_interval", heartbeatInterval, "seconds between worker heartbeats")
      ->capture_default_str()
      ->check(CLI::Range(0.05, 3600.0));
  app.add_option("--heartbeat_timeout", heartbeatTimeout,
                 "seconds without a heartbeat before a rank counts as failed")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 86400.0));
  app.prefix_command();
  app.footer("JOB: 'train --config FILE [--steps N] [--seed N] [--print_param_hash]'");
  CLI11_PARSE(app, argc, argv);
  const std::vector<std::string> jobArgs = app.remaining();

  try {
    if (heartbeatTimeout < 2 * heartbeatInterval)
      throw ds::Error("--heartbeat_timeout " + std::to_string(heartbeatTimeout) +
                      " s: must be at least twice --heartbeat_interval (" +
                      std::to_string(heartbeatInterval) +
                      " s), or one late heartbeat fails the job");
    if (jobArgs.empty())
      throw ds::Error("no job given; try: ds-launch train --config configs/ds_config.json");
    if (jobArgs[0] != "train")
      throw ds::Error("unknown job \"" + jobArgs[0] + "\": the built-in job is \"train\"");

    std::vector<HostEntry> pool;
    if (auto hosts = readHostfile(hostfile)) {
      pool = *hosts;
    } else {
      const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
      pool = {{"localhost", cores}};
      std::cout << "ds-launch: no hostfile at " << hostfile << ": running on localhost with "
                << cores << " ranks (one per core)\n";
    }
    const LaunchPlan plan = makeLaunchPlan(pool, planRequest);
    for (const auto& host : plan.hosts)
      if (!isLoopbackHost(host.host))
        throw ds::Error("host " + host.host +
                        " is remote: this build starts workers on loopback hosts only "
                        "(localhost, 127.0.0.0/8); the ssh/pdsh/MPI/Slurm backends come next");

    std::string configJson;
    if (const std::string path = configPathOf(jobArgs); !path.empty()) {
      configJson = ds::runtime::readDeepSpeedConfigText(path);
      const auto config = ds::runtime::parseDeepSpeedConfig(configJson, plan.worldSize(), path);
      for (const auto& warning : config.warnings)
        std::cerr << "ds-launch: warning: " << warning << '\n';
    } else {
      throw ds::Error("the train job needs --config FILE (a DeepSpeed JSON config)");
    }

    if (masterAddr.empty())
      masterAddr = plan.hosts.front().host == "localhost" ? "127.0.0.1" : plan.hosts.front().host;
    CoordinatorOptions coordinatorOptions;
    coordinatorOptions.bindAddress = masterAddr;
    coordinatorOptions.port = masterPort;
    coordinatorOptions.token = randomToken();
    coordinatorOptions.configJson = configJson;
    coordinatorOptions.jobArgs = jobArgs;
    coordinatorOptions.ranks = plan.ranks;
    coordinatorOptions.heartbeatInterval =
        std::chrono::milliseconds(std::lround(heartbeatInterval * 1000));
    Coordinator coordinator(coordinatorOptions);

    if (logDir.empty()) logDir = defaultLogDir();
    std::cout << "ds-launch: " << plan.worldSize() << " ranks on " << plan.hosts.size()
              << " nodes, coordinator " << coordinator.address() << ", logs in " << logDir << '\n';

    installTerminationHandlers();
    const std::string worker = siblingExecutable("ds-worker");
    std::vector<SpawnedProcess> processes;
    for (const auto& rank : plan.ranks) {
      SpawnRequest request;
      request.argv = {worker,    "--coordinator", coordinator.address(),    "--host",
                      rank.host, "--slot",        std::to_string(rank.slot)};
      // The token travels in the environment, never on a command line (visible in ps).
      request.extraEnv = {{"DS_JOB_TOKEN", coordinatorOptions.token}};
      processes.push_back(spawnInOwnGroup(request));
    }

    SupervisorOptions supervisorOptions;
    supervisorOptions.printAllRanks = printAllRanks;
    supervisorOptions.heartbeatTimeout =
        std::chrono::milliseconds(std::lround(heartbeatTimeout * 1000));
    supervisorOptions.logDir = logDir;
    const JobOutcome outcome = superviseJob(coordinator, plan.ranks, processes, supervisorOptions);
    coordinator.shutdown();

    std::cout << '\n' << formatSummary(outcome);
    if (!outcome.failure.empty()) {
      std::cerr << "ds-launch: job failed: " << outcome.failure << '\n';
      if (outcome.failedRank) {
        std::cerr << "ds-launch: last lines of rank " << *outcome.failedRank << " (" << logDir
                  << "/rank-" << *outcome.failedRank << ".log):\n";
        for (const auto& line : outcome.ranks[*outcome.failedRank].lastLines)
          std::cerr << "  " << line << '\n';
      }
      return outcome.exitStatus != 0 ? outcome.exitStatus : 1;
    }
    return 0;
  } catch (const ds::Error& e) {
    std::cerr << "ds-launch: error: " << e.what() << '\n';
    return kUsageError;
  }
}
