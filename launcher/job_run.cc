// runJob: token -> coordinator -> processes -> supervision -> summary. With --no_ssh on a node
// other than 0, this process becomes that node's agent instead.
#include "launcher/job_run.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <optional>
#include <random>
#include <sstream>

#include "common/error.h"
#include "common/printable.h"
#include "contract/rank_contract.h"
#include "launcher/comms_summary.h"
#include "launcher/coordinator.h"
#include "launcher/job_certificate.h"
#include "launcher/job_supervisor.h"
#include "launcher/worker_process.h"
#include "runtime/checkpoint/checkpoint_files.h"
#include "common/files.h"
#include "runtime/config/job_config.h"

namespace ds::launcher {
namespace {

std::chrono::milliseconds millisecondsOf(double seconds) {
  return std::chrono::milliseconds(std::lround(seconds * 1000));
}

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

// The token reaches workers through the environment only (never argv, so never in ps). A
// DS_JOB_TOKEN from the environment is the job's token (required with --no_ssh, where every
// node's ds-launch must share it); otherwise a fresh random one.
std::string jobToken(const LaunchOptions& flags) {
  if (const char* shared = std::getenv(kJobTokenVariable); shared != nullptr && *shared != '\0') {
    if (std::string(shared).size() < 16)
      throw Error(
          "DS_JOB_TOKEN is shorter than 16 characters; use e.g. "
          "$(openssl rand -hex 32), or unset it for a random token");
    return shared;
  }
  if (flags.noSsh)
    throw Error(
        "--no_ssh: every node's ds-launch must share one secret: export the same "
        "DS_JOB_TOKEN (16+ characters, e.g. $(openssl rand -hex 32)) on every node");
  return randomToken();
}

// Every launch's workers reach the coordinator through one relay per node (worker/node_relay.h),
// named by a fresh id so that no two launches on a machine (elastic epochs, loopback tests) ever
// share one. DS_NODE_RELAY=0 makes every worker connect on its own, as before the relay existed.
// A relay answers its ranks' heartbeats itself, so it must notice a frozen coordinator as fast as
// their own heartbeat calls would have: it pings it every third of the heartbeat timeout and
// gives up after another third.
void addRelay(BackendRequest& request, std::chrono::milliseconds heartbeatTimeout) {
  const char* setting = std::getenv("DS_NODE_RELAY");
  if (setting != nullptr && std::string(setting) == "0") return;
  const auto keepalive = std::max<int64_t>(50, heartbeatTimeout.count() / 3);
  request.workerArgs.insert(
      request.workerArgs.end(),
      {"--relay", randomToken().substr(0, 16), "--relay_keepalive_ms", std::to_string(keepalive)});
}

// --no_ssh on node N > 0: this process becomes the node agent for its ranks.
[[noreturn]] void becomeNodeAgent(BackendRequest& request, const LaunchOptions& flags) {
  request.coordinatorAddress = flags.masterAddr + ":" + std::to_string(flags.masterPort);
  addRelay(request, millisecondsOf(flags.heartbeatTimeout));
  std::vector<std::string> args = nodeAgentCommand(request, std::to_string(flags.nodeRank));
  std::vector<char*> raw;
  for (auto& arg : args) raw.push_back(arg.data());
  raw.push_back(nullptr);
  execv(raw[0], raw.data());
  throw Error("cannot run " + args.front() + ": " + std::strerror(errno));
}

CoordinatorOptions coordinatorOptionsFor(const JobPlan& p, const CommandLine& line,
                                         const std::string& token) {
  const LaunchOptions& flags = line.flags;
  CoordinatorOptions o;
  o.bindAddress = flags.masterAddr;
  o.port = flags.masterPort;
  o.token = token;
  o.configJson = p.configJson;
  o.jobArgs = line.jobArgs;
  o.ranks = p.plan.ranks;
  o.heartbeatInterval = millisecondsOf(flags.heartbeatInterval);
  o.heartbeatTimeout = millisecondsOf(flags.heartbeatTimeout);
  o.program = flags.program;
  if (!flags.tlsCert.empty()) {
    o.tls.certPem = readWholeFile(flags.tlsCert, "PEM certificate (--tls-cert)", 1 << 20);
    o.tls.keyPem = readWholeFile(flags.tlsKey, "PEM key (--tls-key)", 1 << 20);
    o.tls.caPem = readWholeFile(flags.tlsCa, "PEM CA (--tls-ca)", 1 << 20);
  }
  return o;
}

// MVAPICH and Slurm read the placement from a file ds-launch writes.
void writeRunnerHostfile(const JobPlan& p) {
  if (p.backend != Backend::Mvapich && p.backend != Backend::Slurm) return;
  std::filesystem::create_directories(p.request.scratchDir);
  std::ofstream hosts(p.backend == Backend::Slurm ? slurmHostfilePath(p.request)
                                                  : p.request.scratchDir + "/mvapich_hostfile");
  if (p.backend == Backend::Slurm) hosts << slurmHostfileText(p.plan);
  for (const auto& node : p.pool)
    if (p.backend == Backend::Mvapich) hosts << node.host << '\n';
}

std::vector<LaunchedProcess> startProcesses(BackendRequest request,
                                            std::chrono::milliseconds heartbeatTimeout) {
  addRelay(request, heartbeatTimeout);
  std::vector<LaunchedProcess> processes;
  for (const auto& command : buildLaunchCommands(request)) {
    std::string label = command.ranks.size() == 1 ? "rank " + std::to_string(command.ranks[0])
                                                  : command.argv.front();
    if (command.ranks.size() > 1 && !command.host.empty()) label += " " + command.host;
    processes.push_back({spawnInOwnGroup(command.argv, command.env), command.ranks, label});
  }
  return processes;
}

// --enable_each_rank_log's directory, or empty for DIR/rank-N.log.
std::string eachRankLogDir(const LaunchOptions& flags) {
  return flags.eachRankLog != "None" ? flags.eachRankLog : "";
}

SupervisorOptions supervisorOptionsFor(const JobPlan& p, const LaunchOptions& flags) {
  SupervisorOptions o;
  o.printAllRanks = flags.printAllRanks;
  o.heartbeatTimeout = millisecondsOf(flags.heartbeatTimeout);
  o.stallTimeout = millisecondsOf(flags.stallTimeout);
  o.view.terminal = isatty(STDOUT_FILENO) == 1;
  if (winsize size{}; ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0) o.view.columns = size.ws_col;
  o.view.totalSteps = p.job.kind == JobKind::Train ? p.job.train.steps : 0;
  return o;
}

// The summary table, the comms summary, and for a failed job what failed and where its output is.
int report(const JobOutcome& outcome, Coordinator& coordinator, const std::string& logs) {
  std::cout << '\n' << formatSummary(outcome);
  std::vector<std::vector<ds::CommStat>> commStats;
  for (const auto& status : coordinator.snapshot())
    commStats.push_back(status.report ? status.report->commStats
                                      : std::vector<ds::CommStat>{});
  if (const std::string table = formatCommsSummary(commStats); !table.empty())
    std::cout << '\n' << table;
  if (outcome.failure.empty()) return 0;
  // The failure and the log's tail may quote hostile input: printed escaped.
  std::cerr << "ds-launch: job failed: " << printable(outcome.failure) << '\n';
  std::cerr << "ds-launch: every rank's output is in " << logs << '\n';
  if (outcome.failedRank) {
    std::cerr << "ds-launch: last lines of rank " << *outcome.failedRank << " ("
              << outcome.logFiles[*outcome.failedRank] << "):\n";
    for (const auto& line : outcome.ranks[*outcome.failedRank].lastLines)
      std::cerr << "  " << printable(line) << '\n';
  }
  return outcome.exitStatus != 0 ? outcome.exitStatus : 1;
}

// One membership change of an elastic job, for the live messages and the final table.
struct Rescale {
  double atSeconds;        // since the job started
  int oldWorld, newWorld;  // ranks
  std::string cause;
  int64_t failedAtStep, resumedFromStep;
  double restartSeconds;  // from the failure to the new membership's processes started
  double
      resumeSeconds;  // ... to its first step past the checkpoint (seen in heartbeats); -1: not yet
  std::string batchPlan;  // the new membership's micro x accumulation x ranks
};

// The checkpoint step the next membership starts from ("global_stepN" in DIR/latest), 0 if none.
int64_t latestCheckpointStep(const std::string& dir) {
  try {
    const std::string tag = runtime::readLatestTag(dir);
    return tag.rfind("global_step", 0) == 0 ? std::stoll(tag.substr(11)) : 0;
  } catch (const std::exception&) {  // no checkpoint yet, or a tag of another form
    return 0;
  }
}

// A node offered by `ds-worker --join`, as the launcher's resources (slots 0..N-1).
NodeResources nodeOf(const NodeOffer& offer) {
  NodeResources node{offer.host, {}};
  for (int s = 0; s < offer.slots; ++s) node.slots.push_back(s);
  return node;
}

std::string formatRescales(const std::vector<Rescale>& rescales) {
  std::ostringstream out;
  out << "rescales:\n    at s    world   failed at   resumed from   steps lost   restart s   "
         "resume s   batch plan          cause\n";
  for (const Rescale& r : rescales) {
    char line[256];
    std::snprintf(line, sizeof line,
                  "  %6.1f  %2d -> %-3d %9lld %14lld %12lld %11.2f %10s   %-19s ", r.atSeconds,
                  r.oldWorld, r.newWorld, static_cast<long long>(r.failedAtStep),
                  static_cast<long long>(r.resumedFromStep),
                  static_cast<long long>(std::max<int64_t>(0, r.failedAtStep - r.resumedFromStep)),
                  r.restartSeconds,
                  r.resumeSeconds < 0 ? "-" : std::to_string(r.resumeSeconds).substr(0, 5).c_str(),
                  r.batchPlan.c_str());
    out << line << r.cause << '\n';
  }
  return out.str();
}

// --elastic_training: memberships one after another, each with the next epoch, on the largest
// prefix of the surviving nodes (within --min/--max_elastic_nodes) whose world size the
// elasticity block accepts. A failed node is dropped and every rank restarts from the latest
// checkpoint (resharded by the loader); see docs/elasticity.md for why survivors restart as processes.
int runElasticJob(JobPlan& p, const CommandLine& line, CoordinatorOptions options,
                  const std::string& logs) {
  constexpr int kNoValidWorld = 3;
  const LaunchOptions& flags = line.flags;
  const std::string& checkpoints = p.elasticCheckpointDir;
  Resources alive = p.plan.nodes;
  const int minNodes = flags.minElasticNodes > 0 ? flags.minElasticNodes : 1;
  const int maxNodes =
      flags.maxElasticNodes > 0 ? flags.maxElasticNodes : std::numeric_limits<int>::max();
  std::vector<Rescale> rescales;
  const auto jobStart = std::chrono::steady_clock::now();
  std::optional<std::chrono::steady_clock::time_point> failedAt;
  int restarts = 0;
  installTerminationHandlers();
  installShrinkHandler();
  std::cout << "ds-launch: elastic job on " << alive.size() << " node(s) with "
            << p.plan.worldSize() << " slots (" << backendName(p.backend) << "), logs in " << logs
            << std::endl;
  // A membership change: its row in the table, completed when the next membership starts.
  auto beginRescale = [&](int oldWorld, const std::string& cause, int64_t reached) {
    failedAt = std::chrono::steady_clock::now();
    Rescale r{};
    r.atSeconds = std::chrono::duration<double>(*failedAt - jobStart).count();
    r.oldWorld = oldWorld;
    r.cause = cause;
    r.failedAtStep = reached;
    r.resumeSeconds = -1;
    rescales.push_back(r);
  };
  for (uint64_t epoch = 1;; ++epoch) {
    const ValidWorld world = largestValidWorld(alive, minNodes, maxNodes, p.configJson);
    const std::optional<LaunchPlan>& plan = world.plan;
    const runtime::BatchConfig& batch = world.batch;
    const std::string& why = world.why;
    if (!plan) {
      std::cerr << "ds-launch: elastic: no valid world on the " << alive.size()
                << " remaining node(s) (at least " << minNodes << " needed"
                << (why.empty() ? std::string(")") : "; " + why + ")") << "; stopping\n";
      if (!rescales.empty()) std::cerr << formatRescales(rescales);
      return kNoValidWorld;
    }
    p.plan = *plan;
    p.request.plan = *plan;
    options.ranks = plan->ranks;
    options.epoch = epoch;
    // A node offered by `ds-worker --join` is taken when the world with it is valid.
    options.admitOffer = [nodes = plan->nodes, &alive, &p, maxNodes](const std::string& host,
                                                                     int slots) -> std::string {
      for (const NodeResources& node : alive)
        if (node.host == host) return host + " is part of the job already";
      if (static_cast<int>(nodes.size()) >= maxNodes)
        return "the job runs on --max_elastic_nodes " + std::to_string(maxNodes) + " nodes already";
      Resources grown = nodes;
      grown.push_back(nodeOf({host, slots}));
      const int world = makeLaunchPlan(grown).worldSize();
      try {
        runtime::parseJobConfig(p.configJson, world, "config", runtime::MemoryCheck::Elsewhere);
      } catch (const Error& e) {
        return "a world of " + std::to_string(world) +
               " ranks is not valid for the job: " + e.what();
      }
      return "";
    };
    Coordinator coordinator(options);
    p.request.coordinatorAddress = coordinator.address();
    std::cout << "ds-launch: elastic epoch " << epoch << ": " << plan->worldSize() << " ranks on "
              << plan->nodes.size() << " nodes; batch " << batch.trainBatchSize << " = micro "
              << batch.microBatchPerGpu << " x accumulation " << batch.gradientAccumulationSteps
              << " x " << plan->worldSize() << " ranks" << std::endl;
    writeRunnerHostfile(p);
    RankLogs rankLogs(flags.logDir, eachRankLogDir(flags), plan->ranks.size());
    std::vector<LaunchedProcess> processes = startProcesses(p.request, options.heartbeatTimeout);
    if (failedAt) {
      rescales.back().newWorld = plan->worldSize();
      rescales.back().resumedFromStep = latestCheckpointStep(checkpoints);
      rescales.back().restartSeconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - *failedAt).count();
      rescales.back().batchPlan = std::to_string(batch.microBatchPerGpu) + " x " +
                                  std::to_string(batch.gradientAccumulationSteps) + " x " +
                                  std::to_string(plan->worldSize());
    }
    SupervisorOptions supervision = supervisorOptionsFor(p, flags);
    supervision.stopOnShrinkSignal = true;
    // A joined node comes in at the next checkpoint (the STOP saves one more at the step it
    // reaches), or at once with --rescale_now.
    std::optional<int64_t> checkpointWhenOffered;
    supervision.stopWhen = [&]() -> std::string {
      // The time to resume: until a heartbeat shows a step past the checkpoint resumed from.
      if (!rescales.empty() && rescales.back().resumeSeconds < 0) {
        for (const RankStatus& status : coordinator.snapshot())
          if (status.progress.step > rescales.back().resumedFromStep) {
            rescales.back().resumeSeconds =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - *failedAt).count();
            std::cout << "ds-launch: elastic: resumed at " << plan->worldSize() << " ranks "
                      << rescales.back().resumeSeconds << " s after the change" << std::endl;
            break;
          }
      }
      if (!coordinator.hasOffers()) return "";
      if (flags.rescaleNow) return "a node joins (--rescale_now)";
      const int64_t now = latestCheckpointStep(checkpoints);
      if (!checkpointWhenOffered) checkpointWhenOffered = now;
      return now > *checkpointWhenOffered
                 ? "a node joins at the checkpoint of step " + std::to_string(now)
                 : "";
    };
    const JobOutcome outcome =
        superviseJob(coordinator, plan->ranks, processes, rankLogs, supervision);
    // The furthest step any rank reached: heartbeats carry it once a second, so the lines the
    // ranks logged (routed here as they came) may be newer.
    int64_t reached = 0;
    for (const RankStatus& status : coordinator.snapshot())
      reached = std::max(reached, status.progress.step);
    for (const RankOutcome& r : outcome.ranks) reached = std::max(reached, r.loggedStep);
    const std::vector<NodeOffer> joined = coordinator.takeOffers();
    coordinator.shutdown();
    int64_t finished = 0;
    for (const RankOutcome& r : outcome.ranks) finished = std::max(finished, r.steps);
    // A node joined: every rank checkpointed and stopped; go on with it.
    if (outcome.failure.empty() && outcome.stoppedOnRequest && !outcome.shrinkRequested &&
        !joined.empty() && finished < p.job.train.steps) {
      std::string hosts;
      for (const NodeOffer& offer : joined) {
        alive.push_back(nodeOf(offer));
        hosts += (hosts.empty() ? "" : ", ") + offer.host;
      }
      beginRescale(plan->worldSize(), "joined: " + hosts, std::max(reached, finished));
      keepMembershipLogs(outcome.logFiles, epoch);
      continue;
    }
    // Asked to shrink (SIGUSR2): every rank checkpointed and stopped; go on without the last node.
    if (outcome.failure.empty() && outcome.shrinkRequested && finished < p.job.train.steps) {
      beginRescale(plan->worldSize(), "asked to shrink (SIGUSR2)", std::max(reached, finished));
      std::cerr << "ds-launch: elastic: shrinking by one node: dropping " << plan->nodes.back().host
                << "\n";
      const std::string dropped = plan->nodes.back().host;
      std::erase_if(alive, [&](const NodeResources& node) { return node.host == dropped; });
      keepMembershipLogs(outcome.logFiles, epoch);
      continue;
    }
    // Success, an interruption (no failed rank) or the restart budget spent: the job ends here.
    if (outcome.failure.empty() || !outcome.failedRank || restarts == flags.maxRestarts) {
      if (!rescales.empty()) std::cout << '\n' << formatRescales(rescales);
      if (!outcome.failure.empty() && outcome.failedRank)
        std::cerr << "ds-launch: elastic: --max_restarts " << flags.maxRestarts << " spent\n";
      return report(outcome, coordinator, logs);
    }
    ++restarts;
    const RankOutcome& failed = outcome.ranks[*outcome.failedRank];
    // Heartbeats carry the step once a second: a checkpoint may be newer than the last one seen.
    beginRescale(plan->worldSize(), outcome.failure,
                 std::max(reached, latestCheckpointStep(checkpoints)));
    const std::vector<std::string> kept = keepMembershipLogs(outcome.logFiles, epoch);
    std::cerr << "ds-launch: elastic: " << outcome.failure << "; dropping node " << failed.host
              << " and restarting from the latest checkpoint (restart " << restarts << " of "
              << flags.maxRestarts << "); epoch " << epoch << "'s logs kept, rank "
              << *outcome.failedRank << "'s in " << kept[*outcome.failedRank] << "\n";
    std::erase_if(alive, [&](const NodeResources& node) { return node.host == failed.host; });
    for (const NodeOffer& offer : joined) alive.push_back(nodeOf(offer));  // accepted before it
  }
}

}  // namespace

int runJob(JobPlan& p, const CommandLine& line) {
  const LaunchOptions& flags = line.flags;
  for (const auto& notice : p.notices) std::cerr << "ds-launch: " << notice << '\n';
  if (const std::string program = backendProgram(p.backend);
      !program.empty() && !isExecutableOnPath(program))
    throw Error("launcher '" + std::string(backendName(p.backend)) + "' not installed (" + program +
                " is not on PATH)");
  const std::string token = jobToken(flags);
  setenv(kJobTokenVariable, token.c_str(), 1);
  setenv(kSshTokenVariable, token.c_str(), 1);
  if (!p.elasticityConfig.empty())  // local workers and their programs inherit it
    setenv(runtime::kElasticityConfigVariable, p.elasticityConfig.c_str(), 1);
  if (flags.noSsh && flags.nodeRank > 0) becomeNodeAgent(p.request, flags);

  CoordinatorOptions coordinatorOptions = coordinatorOptionsFor(p, line, token);
  std::optional<JobCertificate> certificate;
  if (flags.tlsAuto) {
    certificate.emplace(flags.masterAddr);
    coordinatorOptions.tls = certificate->pem();
    // Local workers inherit the variables; other nodes get them as exports (never in argv).
    for (const auto& [name, text] : {std::pair{kTlsCertPemVariable, certificate->pem().certPem},
                                     {kTlsKeyPemVariable, certificate->pem().keyPem},
                                     {kTlsCaPemVariable, certificate->pem().caPem}}) {
      setenv(name, text.c_str(), 1);
      if (p.backend != Backend::Local) p.request.exports.emplace_back(name, text);
    }
  }
  const std::string logs = flags.eachRankLog != "None" ? flags.eachRankLog : flags.logDir;
  if (flags.elasticTraining) return runElasticJob(p, line, coordinatorOptions, logs);
  Coordinator coordinator(coordinatorOptions);
  p.request.coordinatorAddress = coordinator.address();
  std::cout << "ds-launch: " << p.plan.worldSize() << " ranks on " << p.plan.nodes.size()
            << " nodes (" << backendName(p.backend) << "), coordinator " << coordinator.address()
            << (flags.tlsCert.empty() && !flags.tlsAuto ? "" : " (mutual TLS)") << ", logs in "
            << logs << std::endl;

  writeRunnerHostfile(p);
  installTerminationHandlers();
  RankLogs rankLogs(flags.logDir, eachRankLogDir(flags), p.plan.ranks.size());
  std::vector<LaunchedProcess> processes =
      startProcesses(p.request, coordinatorOptions.heartbeatTimeout);
  SupervisorOptions supervision = supervisorOptionsFor(p, flags);
  supervision.launchStarted = flags.started;
  const JobOutcome outcome =
      superviseJob(coordinator, p.plan.ranks, processes, rankLogs, supervision);
  coordinator.shutdown();
  return report(outcome, coordinator, logs);
}

}  // namespace ds::launcher
