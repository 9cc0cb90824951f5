// planJob: DeepSpeed's resource steps (hostfile, visible devices, include/exclude, num_nodes,
// num_gpus), then the backend, the config and the launch commands' inputs, in that order.
#include "launcher/job_planning.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <limits>

#include "common/error.h"
#include "common/files.h"
#include "common/usable_cores.h"
#include "launcher/exported_env.h"
#include "launcher/hostfile.h"
#include "launcher/log_files.h"
#include "launcher/worker_process.h"
#include "runtime/config/gpt_job_data.h"
#include "runtime/config/job_config.h"
#include "runtime/config/rank_memory_preflight.h"

extern char** environ;

namespace ds::launcher {
namespace {

// No hostfile: one slot per GPU the NVIDIA driver lists, else one per core.
int localSlotCount() {
  int gpus = 0;
  if (DIR* dir = opendir("/proc/driver/nvidia/gpus")) {
    while (dirent* entry = readdir(dir))
      if (entry->d_name[0] != '.') ++gpus;
    closedir(dir);
  }
  if (gpus > 0) return gpus;
  return usableCores();
}

Backend chooseBackend(const LaunchOptions& flags, const LaunchPlan& plan) {
  if (!flags.launcher.empty()) return parseBackend(flags.launcher);
  if (flags.noSsh || allLoopback(plan)) return Backend::Local;
  // DeepSpeed: a single host runs on this machine unless --force_multi.
  if (plan.nodes.size() == 1 && !flags.forceMulti) return Backend::Local;
  return ds::isExecutableOnPath("pdsh") ? Backend::Pdsh : Backend::Ssh;
}

// --elastic_training: only the built-in trainer can go on from a checkpoint on fewer nodes, and
// only with an enabled elasticity block (DeepSpeed's rule). Every membership saves to and loads
// from one checkpoint directory (returned): the job's own, or one in the log directory, every
// kElasticSaveInterval steps when the job sets no interval.
std::string prepareElasticJob(CommandLine& line, JobSpec& job,
                              const std::optional<ds::runtime::JobConfig>& parsed,
                              std::vector<std::string>& notices) {
  constexpr int kElasticSaveInterval = 10;
  if (job.kind != JobKind::Train)
    throw ds::Error(
        "--elastic_training: only the built-in train job resumes from a checkpoint "
        "on fewer nodes; run it without --elastic_training");
  if (!parsed || !parsed->deepspeed.elasticity.enabled)
    throw ds::Error("--elastic_training needs \"elasticity\": {\"enabled\": true, ...} in " +
                    ds::runtime::configPathsText(job.configPaths) +
                    " (the batch size every world size must divide)");
  std::string dir = job.train.saveDir;
  if (dir.empty() && parsed->gpt) dir = parsed->gpt->save;
  if (dir.empty())
    dir = std::filesystem::absolute(line.flags.logDir + "/elastic-checkpoints").string();
  if (job.train.saveDir.empty()) line.jobArgs.insert(line.jobArgs.end(), {"--save_dir", dir});
  if (job.train.loadDir.empty()) line.jobArgs.insert(line.jobArgs.end(), {"--load_dir", dir});
  const bool interval =
      job.train.saveInterval > 0 ||
      (parsed->gpt && (parsed->gpt->saveInterval > 0 || parsed->gpt->checkpoints.periodic()));
  if (!interval) {
    line.jobArgs.insert(line.jobArgs.end(),
                        {"--save_interval", std::to_string(kElasticSaveInterval)});
    notices.push_back("elastic: no checkpoint interval configured; saving every " +
                      std::to_string(kElasticSaveInterval) + " steps to " + dir +
                      " (the most a node failure can cost)");
  }
  job = parseJobArgs(line.jobArgs);
  return dir;
}

// The pool (the whole hostfile, or this machine) and the ranks placed on what DeepSpeed's steps
// select from it: CUDA_VISIBLE_DEVICES, --include/--exclude, --num_nodes, --num_gpus.
struct JobResources {
  Resources pool;
  LaunchPlan plan;
};

JobResources selectJobResources(LaunchOptions& flags, std::vector<std::string>& notices) {
  const auto hostfile = readHostfile(flags.hostfile, &notices);
  flags.selection.hostfileFound = hostfile.has_value();
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  flags.selection.visibleDevices = visible ? visible : "";
  Resources pool;
  if (hostfile) {
    pool = poolFromHostfile(*hostfile);
  } else {
    std::vector<int> slots(localSlotCount());
    for (size_t i = 0; i < slots.size(); ++i) slots[i] = int(i);
    pool = {{"localhost", slots}};
    notices.push_back("no hostfile at " + flags.hostfile + ": running on localhost with " +
                      std::to_string(slots.size()) + " slots");
  }
  const Selection selection = selectResources(pool, flags.selection);
  notices.insert(notices.end(), selection.notices.begin(), selection.notices.end());
  if (selection.clearVisibleDevices) unsetenv("CUDA_VISIBLE_DEVICES");
  return {std::move(pool), makeLaunchPlan(selection.resources)};
}

// The backend, once the flags that cannot work with the plan or with it are refused.
Backend chooseValidBackend(const LaunchOptions& flags, const LaunchPlan& plan) {
  if (flags.noSsh && (flags.nodeRank < 0 || flags.nodeRank >= static_cast<int>(plan.nodes.size())))
    throw ds::Error(
        "Launching training without ssh, but --node_rank is not set correctly: give "
        "--node_rank 0.." +
        std::to_string(plan.nodes.size() - 1));
  const Backend backend = chooseBackend(flags, plan);
  validateBackend(backend, flags.selection.include, flags.selection.exclude,
                  flags.selection.numNodes, flags.selection.numGpus);
  if (flags.noSsh && backend != Backend::Local)
    throw ds::Error("--no_ssh starts this node's ranks itself: drop --launcher " + flags.launcher);
  return backend;
}

// The job's DeepSpeed config as the launch uses it; all empty for a job without one.
struct CheckedConfig {
  std::string json;  // shipped to the workers as read
  std::optional<ds::runtime::JobConfig> parsed;
  std::optional<BatchPlan> batch;
  GridShape grid;
  std::string elasticityConfig;  // JobPlan::elasticityConfig
};

// An elastic job starts on the largest prefix of the nodes its elasticity block accepts (the rest
// are spares), so the config is checked at that world size.
int configWorldSize(const LaunchOptions& flags, const LaunchPlan& plan,
                    const std::string& configJson) {
  if (flags.elasticTraining)
    if (const ValidWorld w =
            largestValidWorld(plan.nodes, 1, std::numeric_limits<int>::max(), configJson);
        w.plan)
      return w.plan->worldSize();
  return plan.worldSize();
}

// Parses the config and refuses, before any rank starts, what the ranks would refuse: memory
// that does not fit and the trainer's config and datasets, where they run on this machine.
ds::runtime::JobConfig parseAndPreflight(const std::string& configJson, int worldSize,
                                         const std::string& path, bool thisMachine,
                                         const JobSpec& job) {
  ds::runtime::JobConfig parsed = ds::runtime::parseJobConfig(
      configJson, worldSize, path,
      thisMachine ? ds::runtime::MemoryCheck::ThisMachine : ds::runtime::MemoryCheck::Elsewhere);
  if (job.kind != JobKind::Train) return parsed;
  if (thisMachine && parsed.gpt) {
    // The tokenizer file, as every rank loads it first; then, since every rank of a loopback or
    // netns job shares this machine's memory, whether the ranks fit.
    const auto tokenizer = ds::runtime::makeJobTokenizer(*parsed.gpt);
    ds::runtime::checkRankMemory(parsed, *tokenizer, worldSize, worldSize, ds::memoryBudget(),
                                 path);
  }
  ds::runtime::checkBuiltInTrainer(parsed);
  ds::runtime::checkTrainingDevice(parsed, trainingDevice(job.train), deviceOrigin(job.train));
  if (thisMachine && parsed.gpt)
    ds::runtime::checkGptJobData(*parsed.gpt,
                                 static_cast<uint64_t>(parsed.deepspeed.batch.trainBatchSize));
  return parsed;
}

void addOffloadNotices(const ds::runtime::DeepSpeedConfig& config, const std::string& path,
                       std::vector<std::string>& notices) {
  const auto& offload = config.zero.offloadOptimizer;
  if (offload.device == ds::runtime::OffloadDevice::Nvme)
    notices.push_back(
        "offload_optimizer nvme: each rank keeps its master weights and optimizer "
        "states in a swap file in " +
        offload.nvmePath + " between steps (ds-config memory " + path +
        " --params N shows the size)");
  else if (offload.device == ds::runtime::OffloadDevice::Cpu)
    notices.push_back(
        "offload_optimizer cpu: the optimizer state lives in CPU memory, as "
        "everything does here");
  const auto& param = config.zero.offloadParam;
  if (param.device == ds::runtime::OffloadDevice::Nvme)
    notices.push_back(
        "offload_param nvme: each rank keeps its parameter shard in a swap file "
        "in " +
        param.nvmePath +
        ", reading each layer's part before its "
        "all-gather");
  else if (param.device == ds::runtime::OffloadDevice::Cpu)
    notices.push_back(
        "offload_param cpu: the parameters live in CPU memory, as everything "
        "does here");
}

// A NeoX YAML's train-iters also sizes the data and the LR decay: one source of the step count.
void takeStepsFromNeox(JobSpec& job, const ds::runtime::GptTrainConfig& gpt,
                       const std::string& path) {
  if (job.train.stepsGiven && job.train.steps != gpt.trainIters)
    throw ds::Error("train --steps " + std::to_string(job.train.steps) + ": " + path +
                    " is a NeoX YAML config, whose train-iters (" + std::to_string(gpt.trainIters) +
                    ") is the number of steps; set train-iters there and drop --steps");
  job.train.steps = gpt.trainIters;
}

// ds-launch chose the world size from this elasticity block, so it is the resource scheduler
// DeepSpeed's runtime asks about; a scheduler above it that already set the variable wins, and a
// config that has changed since it looked is refused before anything starts.
std::string elasticityConfigFor(const ds::runtime::DeepSpeedConfig& config,
                                const std::string& path) {
  if (!config.elasticity.enabled) return "";
  if (const char* seen = std::getenv(ds::runtime::kElasticityConfigVariable)) {
    ds::runtime::ensureImmutableElasticConfig(seen, config.elasticity, path);
    return seen;
  }
  return config.elasticityJson;
}

CheckedConfig checkJobConfig(const LaunchOptions& flags, JobSpec& job, const LaunchPlan& plan,
                             Backend backend, std::vector<std::string>& notices) {
  CheckedConfig checked;
  if (job.configPaths.empty()) return checked;
  const std::string path = ds::runtime::configPathsText(job.configPaths);
  checked.json = ds::runtime::readJobConfigText(job.configPaths);
  const int worldSize = configWorldSize(flags, plan, checked.json);
  // netns hosts share this machine's memory.
  const bool thisMachine = allLoopback(plan) || backend == Backend::Netns;
  checked.parsed = parseAndPreflight(checked.json, worldSize, path, thisMachine, job);
  const ds::runtime::JobConfig& parsed = *checked.parsed;
  const auto& config = parsed.deepspeed;
  for (const auto& note : parsed.notes) notices.push_back("config: " + note);
  addOffloadNotices(config, path, notices);
  if (parsed.gpt && job.kind == JobKind::Train) takeStepsFromNeox(job, *parsed.gpt, path);
  for (const auto& warning : config.warnings) notices.push_back("config: " + warning);
  if (parsed.gpt)
    checked.grid = {parsed.gpt->parallel.pipe, parsed.gpt->parallel.model,
                    parsed.gpt->parallel.sequence};
  checked.batch = BatchPlan{config.batch.trainBatchSize, config.batch.microBatchPerGpu,
                            config.batch.gradientAccumulationSteps};
  checked.elasticityConfig = elasticityConfigFor(config, path);
  return checked;
}

// What other nodes get in their environment: DS_ENV_FILE's (or .deepspeed_env's) variables and
// the elasticity config (local workers inherit it from ds-launch: runJob sets it).
EnvList remoteExports(const std::string& workDir, const std::string& elasticityConfig) {
  std::vector<std::string> environment;
  for (char** entry = environ; *entry != nullptr; ++entry) environment.push_back(*entry);
  const char* home = std::getenv("HOME");
  const char* envFile = std::getenv("DS_ENV_FILE");
  EnvList exports =
      collectExports(environment, workDir, home ? home : "", envFile ? envFile : ".deepspeed_env");
  if (!elasticityConfig.empty())
    addExport(exports, ds::runtime::kElasticityConfigVariable, elasticityConfig);
  return exports;
}

// Everything the launch commands need but the coordinator's address.
BackendRequest makeBackendRequest(const LaunchOptions& flags, Backend backend,
                                  const Resources& pool, const LaunchPlan& plan,
                                  const std::string& elasticityConfig) {
  BackendRequest request;
  request.backend = backend;
  request.plan = plan;
  request.pool = pool;
  request.hostfilePath = flags.hostfile;
  request.workerPath = siblingExecutable("ds-worker");
  request.workDir = std::filesystem::current_path().string();
  request.launcherArgs = flags.launcherArgs;
  request.sshPort = flags.sshPort;
  request.scratchDir = std::filesystem::absolute(flags.logDir).string();
  request.onlyNodeRank = flags.noSsh ? flags.nodeRank : -1;
  if (const char* append = std::getenv("PDSH_SSH_ARGS_APPEND")) request.pdshSshArgsAppend = append;
  request.runningAsRoot = geteuid() == 0;
  if (backend == Backend::Netns) {
    const char* map = std::getenv(kNetnsMapVariable);
    if (map == nullptr)
      throw ds::Error(std::string("--launcher netns: set ") + kNetnsMapVariable +
                      "=HOST=NAMESPACE,... (test/netns_nodes.h makes the namespaces and the map)");
    request.netnsMap = map;
  }
  if (!flags.tlsCert.empty())
    request.workerArgs = {"--tls_cert", std::filesystem::absolute(flags.tlsCert).string(),
                          "--tls_key",  std::filesystem::absolute(flags.tlsKey).string(),
                          "--tls_ca",   std::filesystem::absolute(flags.tlsCa).string()};
  if (backend != Backend::Local) request.exports = remoteExports(request.workDir, elasticityConfig);
  return request;
}

}  // namespace

ValidWorld largestValidWorld(const Resources& nodes, int minNodes, int maxNodes,
                             const std::string& configJson) {
  ValidWorld w;
  for (int n = std::min<int>(maxNodes, static_cast<int>(nodes.size())); n >= minNodes; --n) {
    LaunchPlan candidate = makeLaunchPlan(Resources(nodes.begin(), nodes.begin() + n));
    try {
      // Only the batch rules decide a world here; memory was checked at the start and by ranks.
      w.batch = ds::runtime::parseJobConfig(configJson, candidate.worldSize(), "config",
                                            ds::runtime::MemoryCheck::Elsewhere)
                    .deepspeed.batch;
      w.plan = std::move(candidate);
      return w;
    } catch (const ds::Error& e) {
      if (w.why.empty()) w.why = e.what();
    }
  }
  return w;
}

JobPlan planJob(CommandLine& line) {
  LaunchOptions& flags = line.flags;
  // The job's own arguments are checked here, before anything starts.
  JobSpec job = parseJobArgs(line.jobArgs);
  if (job.kind == JobKind::Train) trainingDevice(job.train);
  std::vector<std::string> notices;
  const auto [pool, plan] = selectJobResources(flags, notices);
  const Backend backend = chooseValidBackend(flags, plan);
  CheckedConfig config = checkJobConfig(flags, job, plan, backend, notices);

  if (flags.masterAddr.empty()) flags.masterAddr = defaultMasterAddress(plan);
  // netns hosts are namespaces of this machine: control traffic never leaves it.
  if (backend != Backend::Local && backend != Backend::Netns && !allLoopback(plan) &&
      flags.tlsCert.empty() && !flags.tlsAuto)
    notices.push_back(
        "the job token and all control traffic cross the network unencrypted; add --tls-auto "
        "(a certificate made for this job) or --tls-cert/--tls-key/--tls-ca");
  if (flags.logDir.empty()) flags.logDir = defaultLogDir();
  std::string elasticCheckpointDir;
  if (flags.elasticTraining)
    elasticCheckpointDir = prepareElasticJob(line, job, config.parsed, notices);
  BackendRequest request = makeBackendRequest(flags, backend, pool, plan, config.elasticityConfig);

  return {std::move(job),
          pool,
          plan,
          backend,
          std::move(config.json),
          config.batch,
          config.grid,
          notices,
          std::move(request),
          std::move(elasticCheckpointDir),
          std::move(config.elasticityConfig)};
}

int printDryRun(JobPlan& p, const LaunchOptions& flags) {
  p.request.coordinatorAddress = flags.masterAddr + ":" + std::to_string(flags.masterPort);
  const DryRun dryRun{p.plan,
                      p.backend,
                      p.request.coordinatorAddress,
                      buildLaunchCommands(p.request),
                      p.request.exports,
                      p.batch,
                      p.notices,
                      p.grid};
  std::cout << (flags.json ? formatDryRunJson(dryRun) : formatDryRunText(dryRun));
  return 0;
}

}  // namespace ds::launcher
