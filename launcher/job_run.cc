// runJob: token -> coordinator -> processes -> supervision -> summary. With --no_ssh on a node
// other than 0, this process becomes that node's agent instead.
#include "launcher/job_run.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <optional>

#include "common/error.h"
#include "common/files.h"
#include "contract/rank_contract.h"
#include "launcher/coordinator.h"
#include "launcher/elastic_controller.h"
#include "launcher/job_certificate.h"
#include "launcher/job_supervisor.h"
#include "launcher/membership_steps.h"
#include "runtime/config/job_config.h"

namespace ds::launcher {
namespace {

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
  if (flags.elasticTraining)
    return ElasticController(p, flags, std::move(coordinatorOptions), logs).run();
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
  return reportOutcome(outcome, coordinator.snapshot(), logs);
}

}  // namespace ds::launcher
