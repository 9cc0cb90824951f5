// Command builders per backend. Workers started by ssh/pdsh run as a node agent (one per node,
// `--world_info --node_rank`, like DeepSpeed's launch.py); workers started by mpirun/srun take
// their rank from the MPI or Slurm environment (`--rank_from_env`); local workers get host+slot.
#include "launcher/backend.h"

#include <algorithm>
#include <cctype>
#include <numeric>

#include "common/error.h"
#include "contract/forwarded_env.h"
#include "contract/world_info.h"

namespace ds::launcher {
namespace {

struct BackendInfo {
  Backend backend;
  const char* name;
  const char* program;
};
constexpr BackendInfo kBackends[] = {
    {Backend::Local, "local", ""},           {Backend::Ssh, "ssh", "ssh"},
    {Backend::Pdsh, "pdsh", "pdsh"},         {Backend::OpenMpi, "openmpi", "mpirun"},
    {Backend::Mpich, "mpich", "mpirun"},     {Backend::Impi, "impi", "mpirun"},
    {Backend::Mvapich, "mvapich", "mpirun"}, {Backend::Slurm, "slurm", "srun"},
    {Backend::Netns, "netns", "ip"}};

std::string joinHosts(const Resources& nodes) {
  std::string hosts;
  for (const auto& node : nodes) hosts += (hosts.empty() ? "" : ",") + node.host;
  return hosts;
}

int totalSlots(const Resources& nodes) {
  return std::accumulate(nodes.begin(), nodes.end(), 0,
                         [](int sum, const NodeResources& n) { return sum + int(n.slots.size()); });
}

// MPICH, Intel MPI and MVAPICH place the same number of ranks on every node (-ppn).
int ranksPerNode(const Resources& nodes, const char* name) {
  for (const auto& node : nodes)
    if (node.slots.size() != nodes.front().slots.size())
      throw Error(std::string(name) + " requires same number of devices per node (host '" +
                  node.host + "' has " + std::to_string(node.slots.size()) + ", host '" +
                  nodes.front().host + "' has " + std::to_string(nodes.front().slots.size()) + ")");
  return static_cast<int>(nodes.front().slots.size());
}

std::vector<int> ranksOf(const LaunchPlan& plan, const std::string& host) {
  std::vector<int> ranks;
  for (const auto& rank : plan.ranks)
    if (host.empty() || rank.host == host) ranks.push_back(rank.rank);
  return ranks;
}

// The names of `exports`, comma-separated (Hydra's -genvlist).
std::string joinNames(const EnvList& exports) {
  std::string names;
  for (const auto& [key, value] : exports) names += (names.empty() ? "" : ",") + key;
  return names;
}

std::vector<std::string> workerCommand(const BackendRequest& request,
                                       std::vector<std::string> identity) {
  std::vector<std::string> argv = {request.workerPath, "--coordinator", request.coordinatorAddress};
  argv.insert(argv.end(), identity.begin(), identity.end());
  argv.insert(argv.end(), request.workerArgs.begin(), request.workerArgs.end());
  return argv;
}

WorldInfo worldInfoOf(const Resources& nodes) {
  WorldInfo world;
  for (const auto& node : nodes) world.emplace_back(node.host, node.slots);
  return world;
}

// One command per builder below, or one per node or rank; `launcherArgs` is --launcher_args split.
using Args = std::vector<std::string>;

void append(Args& argv, const Args& more) { argv.insert(argv.end(), more.begin(), more.end()); }

// The remote shell line of an ssh or pdsh node agent: run from the job's directory.
std::string remoteAgentLine(const BackendRequest& request, const std::string& nodeRankText) {
  return "cd " + shellQuote(request.workDir) + "; exec " +
         shellLine(nodeAgentCommand(request, nodeRankText));
}

std::vector<LaunchCommand> localCommands(const BackendRequest& request) {
  std::vector<LaunchCommand> commands;
  for (const auto& rank : request.plan.ranks) {
    if (request.onlyNodeRank >= 0 && rank.nodeRank != request.onlyNodeRank) continue;
    commands.push_back(
        {rank.host,
         {rank.rank},
         workerCommand(request, {"--host", rank.host, "--slot", std::to_string(rank.slot)}),
         {}});
  }
  return commands;
}

std::vector<LaunchCommand> sshCommands(const BackendRequest& request, const Args& launcherArgs) {
  const LaunchPlan& plan = request.plan;
  const EnvList carriers = forwardedExportVariables(request.exports);
  std::vector<LaunchCommand> commands;
  for (size_t n = 0; n < plan.nodes.size(); ++n) {
    Args argv = {"ssh"};
    if (request.sshPort) append(argv, {"-p", std::to_string(*request.sshPort)});
    append(argv, {"-o", std::string("SendEnv=") + kForwardedSendEnv});
    append(argv, launcherArgs);
    argv.push_back("--");  // whatever the host's name, ssh reads no option from it
    argv.push_back(plan.nodes[n].host);
    argv.push_back(remoteAgentLine(request, std::to_string(n)));
    commands.push_back({plan.nodes[n].host, ranksOf(plan, plan.nodes[n].host), argv, carriers});
  }
  return commands;
}

// Like ssh's node agents, but `ip netns exec` keeps ds-launch's environment (token, exports and
// all), so nothing needs forwarding; the workdir is shared too.
std::vector<LaunchCommand> netnsCommands(const BackendRequest& request) {
  const LaunchPlan& plan = request.plan;
  const auto map = parseNetnsMap(request.netnsMap);
  std::vector<LaunchCommand> commands;
  for (size_t n = 0; n < plan.nodes.size(); ++n) {
    const std::string& host = plan.nodes[n].host;
    const auto found = std::find_if(map.begin(), map.end(),
                                    [&](const auto& entry) { return entry.first == host; });
    if (found == map.end())
      throw Error("--launcher netns: host '" + host + "' has no namespace in " + kNetnsMapVariable +
                  " (HOST=NAMESPACE,...; test/netns_nodes.h writes it)");
    Args argv = {"ip", "netns", "exec", found->second};
    append(argv, nodeAgentCommand(request, std::to_string(n)));
    commands.push_back({host, ranksOf(plan, host), argv, request.exports});
  }
  return commands;
}

LaunchCommand pdshCommand(const BackendRequest& request, const Args& launcherArgs) {
  std::string sshArgs = request.pdshSshArgsAppend;
  sshArgs += (sshArgs.empty() ? "" : " ") + std::string("-o SendEnv=") + kForwardedSendEnv;
  if (request.sshPort) sshArgs += " -p " + std::to_string(*request.sshPort);
  Args argv = {"pdsh", "-S", "-N", "-f", "1024", "-w", joinHosts(request.plan.nodes)};
  append(argv, launcherArgs);
  // pdsh joins its arguments with spaces into one remote shell line; %n is its node index.
  argv.push_back(remoteAgentLine(request, "%n"));
  EnvList env = {{"PDSH_RCMD_TYPE", "ssh"}, {"PDSH_SSH_ARGS_APPEND", sshArgs}};
  const EnvList carriers = forwardedExportVariables(request.exports);
  env.insert(env.end(), carriers.begin(), carriers.end());
  return {"", ranksOf(request.plan, ""), argv, env};
}

LaunchCommand openMpiCommand(const BackendRequest& request, const Args& launcherArgs) {
  Args argv = {"mpirun",
               "-n",
               std::to_string(totalSlots(request.pool)),
               "-hostfile",
               request.hostfilePath,
               "--mca",
               "btl",
               "^openib"};
  bool interfaceGiven = false;
  for (size_t i = 0; i + 1 < launcherArgs.size(); ++i)
    if ((launcherArgs[i] == "-mca" || launcherArgs[i] == "--mca") &&
        launcherArgs[i + 1] == "btl_tcp_if_include")
      interfaceGiven = true;
  if (!interfaceGiven) append(argv, {"--mca", "btl_tcp_if_include", "eth0"});
  append(argv, launcherArgs);
  // DeepSpeed's UCX_TLS=tcp comes first; an exported UCX_TLS replaces its value in place.
  EnvList exports = {{"UCX_TLS", "tcp"}};
  for (const auto& [key, value] : request.exports) addExport(exports, key, value);
  append(argv, {"-x", kJobTokenVariable});
  for (const auto& [key, value] : exports) append(argv, {"-x", key});
  append(argv, workerCommand(request, {"--rank_from_env"}));
  // As root, OpenMPI wants --allow-run-as-root; its environment form keeps argv DeepSpeed's.
  EnvList env = exports;
  if (request.runningAsRoot)
    env.insert(env.end(),
               {{"OMPI_ALLOW_RUN_AS_ROOT", "1"}, {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"}});
  return {"", ranksOf(request.plan, ""), argv, env};
}

// MPICH, Intel MPI and MVAPICH: Hydra's mpirun.
LaunchCommand hydraCommand(const BackendRequest& request, const Args& launcherArgs) {
  const bool mvapich = request.backend == Backend::Mvapich;
  const int perNode = ranksPerNode(request.pool, request.backend == Backend::Mpich  ? "MPICH"
                                                 : request.backend == Backend::Impi ? "Intel MPI"
                                                                                    : "mvapich");
  const int total = totalSlots(request.pool);
  Args argv = {"mpirun", mvapich ? "-np" : "-n", std::to_string(total), "-ppn",
               std::to_string(perNode)};
  if (mvapich) append(argv, {"--hostfile", request.scratchDir + "/mvapich_hostfile"});
  append(argv, launcherArgs);
  EnvList exports = request.exports;
  if (mvapich) {
    EnvList fixed = {{"MV2_SMP_USE_CMA", "0"},
                     {"MV2_DEBUG_SHOW_BACKTRACE", "1"},
                     {"MV2_SUPPORT_DL", "1"},
                     {"MV2_ENABLE_AFFINITY", "0"},
                     {"MV2_INTER_ALLGATHER_TUNING", "5"},
                     {"MV2_CUDA_USE_NAIVE", "0"}};
    for (const auto& [key, value] : request.exports) addExport(fixed, key, value);
    exports = fixed;
  }
  // Names only: Hydra copies the values from mpirun's environment.
  append(argv,
         {"-genvlist", joinNames(exports) + (exports.empty() ? "" : ",") + kJobTokenVariable});
  if (!mvapich) append(argv, {"-hosts", joinHosts(request.pool)});
  append(argv, workerCommand(request, {"--rank_from_env"}));
  return {"", ranksOf(request.plan, ""), argv, exports};
}

// Unlike DeepSpeed (which passes --include/--exclude, options srun does not have), the selection
// is already applied: srun places exactly the planned ranks, task i on the host named on line i
// of SLURM_HOSTFILE (arbitrary distribution).
LaunchCommand slurmCommand(const BackendRequest& request, const Args& launcherArgs) {
  Args argv = {"srun", "-n", std::to_string(request.plan.worldSize()), "-m", "arbitrary"};
  append(argv, launcherArgs);
  // --export=ALL passes srun's whole environment, where the exported values are set.
  argv.push_back("--export=ALL");
  append(argv, workerCommand(request, {"--rank_from_env"}));
  EnvList env = {{"SLURM_HOSTFILE", slurmHostfilePath(request)}};
  env.insert(env.end(), request.exports.begin(), request.exports.end());
  return {"", ranksOf(request.plan, ""), argv, env};
}

}  // namespace

std::vector<std::string> nodeAgentCommand(const BackendRequest& request,
                                          const std::string& nodeRankText) {
  return workerCommand(request, {"--world_info", encodeWorldInfo(worldInfoOf(request.plan.nodes)),
                                 "--node_rank", nodeRankText});
}

std::string slurmHostfilePath(const BackendRequest& request) {
  return request.scratchDir + "/slurm_hostfile";
}

std::string slurmHostfileText(const LaunchPlan& plan) {
  std::string text;
  for (const auto& rank : plan.ranks) text += rank.host + "\n";
  return text;
}

Backend parseBackend(const std::string& name) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
  for (const auto& info : kBackends)
    if (lower == info.name) return info.backend;
  throw Error("--launcher '" + name +
              "': unknown launcher; use one of local, ssh, pdsh, openmpi, mpich, impi, mvapich, "
              "slurm (netns: tests on one machine)");
}

const char* backendName(Backend backend) {
  for (const auto& info : kBackends)
    if (info.backend == backend) return info.name;
  return "?";
}

std::string backendProgram(Backend backend) {
  for (const auto& info : kBackends)
    if (info.backend == backend) return info.program;
  return "";
}

void validateBackend(Backend backend, const std::string& include, const std::string& exclude,
                     int numNodes, int numGpus) {
  if (backend != Backend::OpenMpi && backend != Backend::Mpich && backend != Backend::Impi &&
      backend != Backend::Mvapich)
    return;
  // DeepSpeed's MPI runners start every hostfile slot; a subset cannot be expressed.
  const std::string name = backendName(backend);
  if (!include.empty() || !exclude.empty())
    throw Error(name +
                " backend does not support worker include/exclusion: edit the hostfile "
                "instead");
  if (numNodes != -1 || numGpus != -1)
    throw Error(name +
                " backend does not support limiting num nodes/gpus: edit the hostfile "
                "instead");
}

std::vector<std::pair<std::string, std::string>> parseNetnsMap(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> map;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(',', start), text.size());
    const std::string entry = text.substr(start, end - start);
    start = end + 1;
    if (entry.empty()) continue;
    const size_t equals = entry.find('=');
    const std::string name = equals == std::string::npos ? "" : entry.substr(equals + 1);
    // ip netns keeps a namespace as a file in /run/netns: a name is one plain path component.
    if (equals == 0 || name.empty() || name == "." || name == ".." ||
        name.find('/') != std::string::npos)
      throw Error(std::string(kNetnsMapVariable) + ": expected HOST=NAMESPACE, got '" + entry +
                  "'");
    map.emplace_back(entry.substr(0, equals), name);
  }
  return map;
}

std::vector<std::string> splitShellWords(const std::string& text) {
  std::vector<std::string> words;
  std::string word;
  bool inWord = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\'') {
      const auto end = text.find('\'', i + 1);
      if (end == std::string::npos) throw Error("--launcher_args: no closing quotation");
      word += text.substr(i + 1, end - i - 1);
      i = end;
      inWord = true;
    } else if (c == '"') {
      size_t j = i + 1;
      for (; j < text.size() && text[j] != '"'; ++j) {
        if (text[j] == '\\' && j + 1 < text.size() &&
            std::string_view("\\\"$`\n").find(text[j + 1]) != std::string_view::npos)
          ++j;
        word += text[j];
      }
      if (j >= text.size()) throw Error("--launcher_args: no closing quotation");
      i = j;
      inWord = true;
    } else if (c == '\\' && i + 1 < text.size()) {
      word += text[++i];
      inWord = true;
    } else if (std::isspace(static_cast<unsigned char>(c))) {
      if (inWord) words.push_back(std::move(word));
      word.clear();
      inWord = false;
    } else {
      word += c;
      inWord = true;
    }
  }
  if (inWord) words.push_back(std::move(word));
  return words;
}

std::vector<LaunchCommand> buildLaunchCommands(const BackendRequest& request) {
  // Exported values never appear on a command line (ps would show them on both ends): ssh and
  // pdsh carry them in forwarded LC_DS_EXPORT_<n> variables, MPI and Slurm in the runner's own
  // environment, named only (-x NAME, -genvlist, srun's --export=ALL).
  const std::vector<std::string> launcherArgs = splitShellWords(request.launcherArgs);
  switch (request.backend) {
    case Backend::Local:
      return localCommands(request);
    case Backend::Ssh:
      return sshCommands(request, launcherArgs);
    case Backend::Netns:
      return netnsCommands(request);
    case Backend::Pdsh:
      return {pdshCommand(request, launcherArgs)};
    case Backend::OpenMpi:
      return {openMpiCommand(request, launcherArgs)};
    case Backend::Mpich:
    case Backend::Impi:
    case Backend::Mvapich:
      return {hydraCommand(request, launcherArgs)};
    case Backend::Slurm:
      return {slurmCommand(request, launcherArgs)};
  }
  return {};
}

}  // namespace ds::launcher
