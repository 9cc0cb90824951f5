// The steps every membership of a ds-launch job takes, shared by a plain run (job_run.cc) and an
// elastic one (elastic_controller.h): the runner's hostfile, the processes with their node relays,
// the supervisor's options and the final report. Choosing the membership is the callers' job.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "launcher/coordinator.h"
#include "launcher/job_planning.h"
#include "launcher/job_supervisor.h"

namespace ds::launcher {

std::chrono::milliseconds millisecondsOf(double seconds);

// 256 random bits as hex, from /dev/urandom.
std::string randomToken();

// Every launch's workers reach the coordinator through one relay per node (worker/node_relay.h):
// adds its flags to the workers' arguments unless DS_NODE_RELAY=0.
void addRelay(BackendRequest& request, std::chrono::milliseconds heartbeatTimeout);

// MVAPICH and Slurm read the placement from a file ds-launch writes; other backends: nothing.
void writeRunnerHostfile(const JobPlan& plan);

// Starts the backend's launch commands, each in its own process group.
std::vector<LaunchedProcess> startProcesses(BackendRequest request,
                                            std::chrono::milliseconds heartbeatTimeout);

// --enable_each_rank_log's directory, or empty for DIR/rank-N.log.
std::string eachRankLogDir(const LaunchOptions& flags);

SupervisorOptions supervisorOptionsFor(const JobPlan& plan, const LaunchOptions& flags);

// The summary table, the comms summary (from the ranks' reports in `ranks`, the coordinator's
// last snapshot), and for a failed job what failed and where its output is. Returns ds-launch's
// exit status.
int reportOutcome(const JobOutcome& outcome, const std::vector<RankStatus>& ranks,
                  const std::string& logs);

}  // namespace ds::launcher
