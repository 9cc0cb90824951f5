// ds-worker's command line: the flags, parsed once, and which of its modes they ask for. CLI11
// stays in worker_options.cc; acting on the options is main.cc's.
#pragma once

#include <optional>
#include <string>

namespace ds::worker {

struct WorkerOptions {
  std::string coordinatorAddress;  // host:port
  std::string joinAddress;         // --join: offer this node to the job there
  int offeredSlots = 0;
  std::string host;  // --host/--slot: a rank started by ds-launch or a node agent
  int slot = -1;
  std::string worldInfo;  // --world_info/--node_rank: the node agent
  int nodeRank = -1;
  bool rankFromEnv = false;  // a rank started by mpirun or srun
  int joinTimeoutSeconds = 60;
  std::string relay;  // this launch's relay id; empty: straight to the coordinator
  int relayKeepaliveMs = 5000;
  std::string tlsCert, tlsKey, tlsCa;  // paths
};

// Parses argv into `out`. Returns the status to exit with when parsing ends the run (--help: 0; a
// bad flag: 2, CLI11's message printed), nullopt to go on.
std::optional<int> parseWorkerOptions(int argc, char** argv, WorkerOptions& out);

// Why the options do not name exactly one way to run a rank or a node agent; "" when they do.
// (--join is its own mode, checked before this.)
std::string usageProblem(const WorkerOptions& options);

}  // namespace ds::worker
