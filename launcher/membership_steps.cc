// The steps of one membership, shared by runJob and the ElasticController (membership_steps.h).
#include "launcher/membership_steps.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>

#include "common/printable.h"
#include "launcher/comms_summary.h"

namespace ds::launcher {

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
  o.view.grid = p.grid;
  return o;
}

int reportOutcome(const JobOutcome& outcome, const std::vector<RankStatus>& ranks,
                  const std::string& logs) {
  std::cout << '\n' << formatSummary(outcome);
  std::vector<std::vector<CommStat>> commStats;
  for (const auto& status : ranks)
    commStats.push_back(status.report ? status.report->commStats
                                      : std::vector<CommStat>{});
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

}  // namespace ds::launcher
