// ds-launch: plan the job (hostfile, --include/--exclude, --num_nodes/--num_gpus, as DeepSpeed's
// runner), start the coordinator, start the workers through the chosen backend, supervise until
// the job ends, print the summary. Exit 0 only when every rank succeeded.
#include <dirent.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <thread>

#include "launcher/backend.h"
#include "launcher/comms_summary.h"
#include "launcher/coordinator.h"
#include "launcher/dry_run.h"
#include "launcher/hostfile.h"
#include "launcher/job_supervisor.h"
#include "launcher/launch_plan.h"
#include "launcher/resources.h"
#include "launcher/worker_process.h"
#include "common/error.h"
#include "contract/job_args.h"
#include "runtime/common/files.h"
#include "runtime/config/ds_config.h"

extern char** environ;

namespace {

using namespace ds::launcher;

constexpr int kUsageError = 2;

struct Flags {
  std::string hostfile = "/job/hostfile";
  SelectionRequest selection;
  std::string masterAddr;
  int masterPort = 29500;
  std::string launcher;
  std::string launcherArgs;
  std::optional<int> sshPort;
  bool forceMulti = false, noSsh = false, noSshCheck = false;
  int nodeRank = -1;
  bool module = false, noPython = false, noLocalRank = false;
  std::string logDir, eachRankLog = "None";
  bool printAllRanks = false;
  double heartbeatInterval = 1.0, heartbeatTimeout = 10.0, stallTimeout = 0.0;
  bool dryRun = false, json = false;
  std::string tlsCert, tlsKey, tlsCa;
  std::string python = "python3";
};

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

// Per user and outside the working directory, so a run inside a checkout dirties nothing, yet
// kept after the job (unlike torchrun's temporary directory) for the post-mortem:
// $XDG_STATE_HOME/ds-launch/<time>-<pid>, by default ~/.local/state/ds-launch/..., or
// $TMPDIR/ds-launch-<uid>/... when there is no home directory.
std::string defaultLogDir() {
  char stamp[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", std::localtime(&now));
  const std::string run = std::string(stamp) + "-" + std::to_string(getpid());
  const char* state = std::getenv("XDG_STATE_HOME");
  const char* home = std::getenv("HOME");
  if (state != nullptr && state[0] == '/') return std::string(state) + "/ds-launch/" + run;
  if (home != nullptr && home[0] == '/') return std::string(home) + "/.local/state/ds-launch/" + run;
  const char* tmp = std::getenv("TMPDIR");
  return std::string(tmp != nullptr && tmp[0] == '/' ? tmp : "/tmp") + "/ds-launch-" +
         std::to_string(getuid()) + "/" + run;
}

// No hostfile: one slot per GPU the NVIDIA driver lists, else one per core.
int localSlotCount() {
  int gpus = 0;
  if (DIR* dir = opendir("/proc/driver/nvidia/gpus")) {
    while (dirent* entry = readdir(dir))
      if (entry->d_name[0] != '.') ++gpus;
    closedir(dir);
  }
  if (gpus > 0) return gpus;
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

Backend chooseBackend(const Flags& flags, const LaunchPlan& plan) {
  if (!flags.launcher.empty()) return parseBackend(flags.launcher);
  if (flags.noSsh || allLoopback(plan)) return Backend::Local;
  // DeepSpeed: a single host runs on this machine unless --force_multi.
  if (plan.nodes.size() == 1 && !flags.forceMulti) return Backend::Local;
  return ds::isExecutableOnPath("pdsh") ? Backend::Pdsh : Backend::Ssh;
}

void addFlags(CLI::App& app, Flags& flags) {
  app.add_option("-H,--hostfile", flags.hostfile,
                 "MPI-style hostfile ('host slots=N'); if missing, localhost with one rank per "
                 "GPU (or per core without GPUs)")
      ->capture_default_str();
  app.add_option("-i,--include", flags.selection.include,
                 "only these nodes/slots: NODE_SPEC[@NODE_SPEC ...], NODE_SPEC = HOST[:SLOT,SLOT]");
  app.add_option("-e,--exclude", flags.selection.exclude, "all but these nodes/slots (NODE_SPEC)");
  app.add_option("--num_nodes", flags.selection.numNodes, "use the first N hosts of the hostfile");
  app.add_option("--num_gpus,--num_accelerators", flags.selection.numGpus,
                 "use slots 0..N-1 of every host");
  app.add_option("--master_addr", flags.masterAddr,
                 "address the coordinator listens on (default: the first host when all are "
                 "loopback, else this machine's address)");
  app.add_option("--master_port", flags.masterPort, "coordinator port (0: any free port)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  app.add_option("--launcher", flags.launcher,
                 "local, ssh, pdsh, openmpi, mpich, impi, mvapich or slurm (default: local for "
                 "loopback hosts, else pdsh if installed, else ssh)");
  app.add_option("--launcher_args", flags.launcherArgs, "extra arguments for the launcher program");
  app.add_option("--ssh_port", flags.sshPort, "ssh port for the ssh and pdsh launchers");
  app.add_flag("--force_multi", flags.forceMulti, "use the multi-node launcher even for one host");
  app.add_flag("--no_ssh", flags.noSsh,
               "start only this node's ranks (run ds-launch on every node with --node_rank and "
               "the same DS_JOB_TOKEN)");
  app.add_option("--node_rank", flags.nodeRank, "this node's index, with --no_ssh");
  app.add_flag("--no_ssh_check", flags.noSshCheck, "accepted for DeepSpeed compatibility");
  app.add_flag("--module", flags.module, "run PROGRAM as a Python module (python -m)");
  app.add_flag("--no_python", flags.noPython, "run PROGRAM directly, not through python");
  app.add_flag("--no_local_rank", flags.noLocalRank, "do not pass --local_rank=N to PROGRAM");
  app.add_option("--python", flags.python, "interpreter for Python programs")
      ->capture_default_str();
  app.add_option("--log_dir", flags.logDir,
                 "directory for rank-N.log files (default: ~/.local/state/ds-launch/<time>-<pid>, "
                 "under $XDG_STATE_HOME if set)");
  app.add_option("--enable_each_rank_log", flags.eachRankLog,
                 "write each rank's output to DIR/<time>_rank<N>.log (DeepSpeed's naming)");
  app.add_flag("--print_all_ranks", flags.printAllRanks,
               "show every rank's output, not only rank 0's");
  app.add_option("--heartbeat_interval", flags.heartbeatInterval,
                 "seconds between worker heartbeats")
      ->capture_default_str()
      ->check(CLI::Range(0.05, 3600.0));
  app.add_option("--heartbeat_timeout", flags.heartbeatTimeout,
                 "seconds without a heartbeat before a rank counts as failed")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 86400.0));
  app.add_option("--stall_timeout", flags.stallTimeout,
                 "seconds a heartbeating rank's step may stay the same before the job counts as "
                 "stalled (0: off)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 864000.0));
  app.add_flag("--dry-run,--dry_run", flags.dryRun,
               "print the plan and the commands; start nothing");
  app.add_flag("--json", flags.json, "with --dry-run: one JSON object on stdout");
  app.add_option("--tls-cert,--tls_cert", flags.tlsCert,
                 "PEM certificate (coordinator and workers)");
  app.add_option("--tls-key,--tls_key", flags.tlsKey, "PEM private key of --tls-cert");
  app.add_option("--tls-ca,--tls_ca", flags.tlsCa, "PEM CA that signed every peer's certificate");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ds-launch: start a distributed training job (DeepSpeed-compatible flags)"};
  Flags flags;
  addFlags(app, flags);
  app.prefix_command();
  app.footer(
      "JOB: 'train --config FILE [--steps N] [--seed N]' (the built-in trainer), 'barrier' (every\n"
      "     rank joins, one barrier, exit: a no-op job), or\n"
      "     [--] PROGRAM [ARGS] (any program, with RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, "
      "...)");
  CLI11_PARSE(app, argc, argv);
  std::vector<std::string> jobArgs = app.remaining();
  if (!jobArgs.empty() && jobArgs[0] == "--") jobArgs.erase(jobArgs.begin());

  try {
    if (flags.heartbeatTimeout < 2 * flags.heartbeatInterval)
      throw ds::Error("--heartbeat_timeout " + std::to_string(flags.heartbeatTimeout) +
                      " s: must be at least twice --heartbeat_interval (" +
                      std::to_string(flags.heartbeatInterval) +
                      " s), or one late heartbeat fails the job");
    if (flags.json && !flags.dryRun) throw ds::Error("--json only goes with --dry-run");
    if (flags.module && flags.noPython)
      throw ds::Error(
          "Don't use both the '--no_python' flag and the '--module' flag at the same time.");
    if ((flags.tlsCert.empty() != flags.tlsKey.empty()) ||
        (flags.tlsCert.empty() != flags.tlsCa.empty()))
      throw ds::Error("--tls-cert, --tls-key and --tls-ca go together: give all three");
    if (jobArgs.empty())
      throw ds::Error(
          "no job given; try: ds-launch train --config configs/ds_config.json, or "
          "ds-launch [flags] -- PROGRAM ARGS");
    // The job's own arguments are checked here, before anything starts.
    const ds::JobSpec job = ds::parseJobArgs(jobArgs);

    // Resource selection, in DeepSpeed's order.
    const auto hostfile = readHostfile(flags.hostfile);
    flags.selection.hostfileFound = hostfile.has_value();
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    flags.selection.visibleDevices = visible ? visible : "";
    const Resources pool = hostfile ? poolFromHostfile(*hostfile)
                                    : Resources{{"localhost", [] {
                                                   std::vector<int> slots(localSlotCount());
                                                   for (size_t i = 0; i < slots.size(); ++i)
                                                     slots[i] = int(i);
                                                   return slots;
                                                 }()}};
    std::vector<std::string> notices;
    if (!hostfile)
      notices.push_back("no hostfile at " + flags.hostfile + ": running on localhost with " +
                        std::to_string(pool.front().slots.size()) + " slots");
    const Selection selection = selectResources(pool, flags.selection);
    notices.insert(notices.end(), selection.notices.begin(), selection.notices.end());
    if (selection.clearVisibleDevices) unsetenv("CUDA_VISIBLE_DEVICES");
    const LaunchPlan plan = makeLaunchPlan(selection.resources);
    if (flags.noSsh &&
        (flags.nodeRank < 0 || flags.nodeRank >= static_cast<int>(plan.nodes.size())))
      throw ds::Error(
          "Launching training without ssh, but --node_rank is not set correctly: give "
          "--node_rank 0.." +
          std::to_string(plan.nodes.size() - 1));

    const Backend backend = chooseBackend(flags, plan);
    validateBackend(backend, flags.selection.include, flags.selection.exclude,
                    flags.selection.numNodes, flags.selection.numGpus);
    if (flags.noSsh && backend != Backend::Local)
      throw ds::Error("--no_ssh starts this node's ranks itself: drop --launcher " +
                      flags.launcher);

    std::string configJson;
    std::optional<BatchPlan> batch;
    if (const std::string& path = job.configPath; !path.empty()) {
      configJson = ds::runtime::readDeepSpeedConfigText(path);
      const auto config = ds::runtime::parseDeepSpeedConfig(configJson, plan.worldSize(), path);
      for (const auto& warning : config.warnings) notices.push_back("config: " + warning);
      batch = BatchPlan{config.batch.trainBatchSize, config.batch.microBatchPerGpu,
                        config.batch.gradientAccumulationSteps};
    }

    if (flags.masterAddr.empty()) flags.masterAddr = defaultMasterAddress(plan);
    if (flags.logDir.empty()) flags.logDir = defaultLogDir();
    const std::string workDir = std::filesystem::current_path().string();

    BackendRequest request;
    request.backend = backend;
    request.plan = plan;
    request.pool = pool;
    request.hostfilePath = flags.hostfile;
    request.workerPath = siblingExecutable("ds-worker");
    request.workDir = workDir;
    request.launcherArgs = flags.launcherArgs;
    request.sshPort = flags.sshPort;
    request.scratchDir = std::filesystem::absolute(flags.logDir).string();
    request.onlyNodeRank = flags.noSsh ? flags.nodeRank : -1;
    if (const char* append = std::getenv("PDSH_SSH_ARGS_APPEND"))
      request.pdshSshArgsAppend = append;
    request.runningAsRoot = geteuid() == 0;
    if (!flags.tlsCert.empty())
      request.workerArgs = {"--tls_cert", std::filesystem::absolute(flags.tlsCert).string(),
                            "--tls_key",  std::filesystem::absolute(flags.tlsKey).string(),
                            "--tls_ca",   std::filesystem::absolute(flags.tlsCa).string()};
    if (backend != Backend::Local) {
      std::vector<std::string> environment;
      for (char** entry = environ; *entry != nullptr; ++entry) environment.push_back(*entry);
      const char* home = std::getenv("HOME");
      const char* envFile = std::getenv("DS_ENV_FILE");
      request.exports = collectExports(environment, workDir, home ? home : "",
                                       envFile ? envFile : ".deepspeed_env");
    }

    if (flags.dryRun) {
      request.coordinatorAddress = flags.masterAddr + ":" + std::to_string(flags.masterPort);
      DryRun dryRun{
          plan,  backend, request.coordinatorAddress, buildLaunchCommands(request), request.exports,
          batch, notices};
      std::cout << (flags.json ? formatDryRunJson(dryRun) : formatDryRunText(dryRun));
      return 0;
    }
    for (const auto& notice : notices) std::cerr << "ds-launch: " << notice << '\n';
    if (const std::string program = backendProgram(backend);
        !program.empty() && !ds::isExecutableOnPath(program))
      throw ds::Error("launcher '" + std::string(backendName(backend)) + "' not installed (" +
                      program + " is not on PATH)");

    // The token reaches workers through the environment only (never argv, so never in ps).
    // A DS_JOB_TOKEN from the environment is the job's token (required with --no_ssh, where
    // every node's ds-launch must share it); otherwise a fresh random one.
    std::string token = randomToken();
    if (const char* shared = std::getenv(ds::kJobTokenVariable); shared != nullptr && *shared != '\0') {
      if (std::string(shared).size() < 16)
        throw ds::Error("DS_JOB_TOKEN is shorter than 16 characters; use e.g. "
                        "$(openssl rand -hex 32), or unset it for a random token");
      token = shared;
    } else if (flags.noSsh) {
      throw ds::Error(
          "--no_ssh: every node's ds-launch must share one secret: export the same "
          "DS_JOB_TOKEN (16+ characters, e.g. $(openssl rand -hex 32)) on every node");
    }
    setenv(ds::kJobTokenVariable, token.c_str(), 1);
    setenv(ds::kSshTokenVariable, token.c_str(), 1);

    if (flags.noSsh && flags.nodeRank > 0) {
      // Not the master node: this process becomes the node agent for its ranks.
      request.coordinatorAddress = flags.masterAddr + ":" + std::to_string(flags.masterPort);
      std::vector<std::string> args = nodeAgentCommand(request, std::to_string(flags.nodeRank));
      std::vector<char*> raw;
      for (auto& arg : args) raw.push_back(arg.data());
      raw.push_back(nullptr);
      execv(raw[0], raw.data());
      throw ds::Error("cannot run " + args.front() + ": " + std::strerror(errno));
    }

    CoordinatorOptions coordinatorOptions;
    coordinatorOptions.bindAddress = flags.masterAddr;
    coordinatorOptions.port = flags.masterPort;
    coordinatorOptions.token = token;
    coordinatorOptions.configJson = configJson;
    coordinatorOptions.jobArgs = jobArgs;
    coordinatorOptions.ranks = plan.ranks;
    coordinatorOptions.heartbeatInterval =
        std::chrono::milliseconds(std::lround(flags.heartbeatInterval * 1000));
    coordinatorOptions.heartbeatTimeout =
        std::chrono::milliseconds(std::lround(flags.heartbeatTimeout * 1000));
    coordinatorOptions.programModule = flags.module;
    coordinatorOptions.programNoPython = flags.noPython;
    coordinatorOptions.programNoLocalRank = flags.noLocalRank;
    coordinatorOptions.python = flags.python;
    if (!flags.tlsCert.empty()) {
      coordinatorOptions.tls.certPem = ds::readWholeFile(flags.tlsCert, "--tls-cert");
      coordinatorOptions.tls.keyPem = ds::readWholeFile(flags.tlsKey, "--tls-key");
      coordinatorOptions.tls.caPem = ds::readWholeFile(flags.tlsCa, "--tls-ca");
    }
    Coordinator coordinator(coordinatorOptions);
    request.coordinatorAddress = coordinator.address();

    std::cout << "ds-launch: " << plan.worldSize() << " ranks on " << plan.nodes.size()
              << " nodes (" << backendName(backend) << "), coordinator " << coordinator.address()
              << (flags.tlsCert.empty() ? "" : " (mutual TLS)") << ", logs in "
              << (flags.eachRankLog != "None" ? flags.eachRankLog : flags.logDir) << std::endl;

    if (backend == Backend::Mvapich || backend == Backend::Slurm) {
      std::filesystem::create_directories(request.scratchDir);
      std::ofstream hosts(backend == Backend::Slurm ? slurmHostfilePath(request)
                                                    : request.scratchDir + "/mvapich_hostfile");
      if (backend == Backend::Slurm) hosts << slurmHostfileText(plan);
      for (const auto& node : pool)
        if (backend == Backend::Mvapich) hosts << node.host << '\n';
    }
    installTerminationHandlers();
    std::vector<LaunchedProcess> processes;
    for (const auto& command : buildLaunchCommands(request)) {

      std::string label = command.ranks.size() == 1 ? "rank " + std::to_string(command.ranks[0])
                                                    : command.argv.front();
      if (command.ranks.size() > 1 && !command.host.empty()) label += " " + command.host;
      processes.push_back({spawnInOwnGroup(command.argv, command.env), command.ranks, label});
    }

    SupervisorOptions supervisorOptions;
    supervisorOptions.printAllRanks = flags.printAllRanks;
    supervisorOptions.heartbeatTimeout =
        std::chrono::milliseconds(std::lround(flags.heartbeatTimeout * 1000));
    supervisorOptions.stallTimeout =
        std::chrono::milliseconds(std::lround(flags.stallTimeout * 1000));
    supervisorOptions.logDir = flags.logDir;
    if (flags.eachRankLog != "None") supervisorOptions.eachRankLogDir = flags.eachRankLog;
    supervisorOptions.view.terminal = isatty(STDOUT_FILENO) == 1;
    if (winsize size{}; ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0)
      supervisorOptions.view.columns = size.ws_col;
    supervisorOptions.view.totalSteps = job.kind == ds::JobKind::Train ? job.train.steps : 0;
    const JobOutcome outcome = superviseJob(coordinator, plan.ranks, processes, supervisorOptions);
    coordinator.shutdown();

    std::cout << '\n' << formatSummary(outcome);
    std::vector<std::vector<ds::runtime::CommStat>> commStats;
    for (const auto& status : coordinator.snapshot())
      commStats.push_back(status.report ? status.report->commStats
                                        : std::vector<ds::runtime::CommStat>{});
    if (const std::string table = formatCommsSummary(commStats); !table.empty())
      std::cout << '\n' << table;
    if (!outcome.failure.empty()) {
      std::cerr << "ds-launch: job failed: " << outcome.failure << '\n';
      std::cerr << "ds-launch: every rank's output is in "
                << (flags.eachRankLog != "None" ? flags.eachRankLog : flags.logDir) << '\n';
      if (outcome.failedRank) {
        std::cerr << "ds-launch: last lines of rank " << *outcome.failedRank << " ("
                  << outcome.logFiles[*outcome.failedRank] << "):\n";
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
