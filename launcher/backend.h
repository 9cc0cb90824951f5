// Backends: how ds-worker processes get started on the nodes. Each backend turns the launch plan
// into the commands ds-launch runs (and --dry-run prints), with DeepSpeed's multinode runners'
// argument shapes (DEEPSPEED-SEMANTICS.md section 9). Building commands needs no network.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "launcher/exported_env.h"
#include "launcher/launch_plan.h"
#include "launcher/resources.h"

namespace ds::launcher {

// Netns is for tests and benches on one machine: each hostfile host is a network namespace
// (test/netns_nodes.h makes them), named in DS_NETNS_MAP.
enum class Backend { Local, Ssh, Pdsh, OpenMpi, Mpich, Impi, Mvapich, Slurm, Netns };

// The netns backend's map from hostfile host to network namespace: "HOST=NAMESPACE,...".
inline constexpr const char* kNetnsMapVariable = "DS_NETNS_MAP";

// Lower-cased name -> backend; unknown names are an error listing the supported ones.
Backend parseBackend(const std::string& name);
const char* backendName(Backend backend);
// The executable the backend needs on PATH ("" for local).
std::string backendProgram(Backend backend);

struct BackendRequest {
  Backend backend = Backend::Local;
  LaunchPlan plan;
  Resources pool;  // the whole hostfile (MPI runners use it, as DeepSpeed's do)
  std::string hostfilePath;
  std::string coordinatorAddress;  // host:port
  std::string workerPath;          // absolute path of ds-worker (the same on every node)
  std::string workDir;             // absolute; remote commands cd there
  std::string launcherArgs;        // --launcher_args, split like shlex.split
  std::optional<int> sshPort;
  EnvList exports;                      // forwarded to remote nodes
  std::vector<std::string> workerArgs;  // extra ds-worker flags (TLS paths, ...)
  std::string scratchDir;               // where generated files go (MVAPICH hostfile)
  int onlyNodeRank = -1;                // --no_ssh: this node only
  std::string pdshSshArgsAppend;        // the user's PDSH_SSH_ARGS_APPEND, kept
  bool runningAsRoot = false;           // OpenMPI refuses root unless told it is fine
  std::string netnsMap;                 // netns: DS_NETNS_MAP's value
};

// One process ds-launch starts.
struct LaunchCommand {
  std::string host;        // where its ranks run ("" when it spans nodes)
  std::vector<int> ranks;  // ranks it starts
  std::vector<std::string> argv;
  EnvList env;  // added to ds-launch's environment for this process
};

// Throws ds::Error for combinations the backend cannot express (e.g. openmpi with --include).
void validateBackend(Backend backend, const std::string& include, const std::string& exclude,
                     int numNodes, int numGpus);

std::vector<LaunchCommand> buildLaunchCommands(const BackendRequest& request);

// The node agent each node runs for ssh, pdsh and --no_ssh: `ds-worker --coordinator A
// --world_info B64 --node_rank N [worker args]` (N may be pdsh's "%n").
std::vector<std::string> nodeAgentCommand(const BackendRequest& request,
                                          const std::string& nodeRankText);

// The slurm backend's SLURM_HOSTFILE: where it goes and what ds-launch writes there (one line per
// rank with its host, in rank order).
std::string slurmHostfilePath(const BackendRequest& request);
std::string slurmHostfileText(const LaunchPlan& plan);

// DS_NETNS_MAP's text -> (host, namespace) pairs; a malformed entry or a namespace name that is
// not a plain file name is an error naming it.
std::vector<std::pair<std::string, std::string>> parseNetnsMap(const std::string& text);

// shlex.split: whitespace-separated words with '...' and "..." quoting and backslash escapes.
std::vector<std::string> splitShellWords(const std::string& text);

}  // namespace ds::launcher
