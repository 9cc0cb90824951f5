// Node agent: one worker per slot through the spawn helper; children get PDEATHSIG so killing the
// agent (ssh session gone, pdsh killed) takes them along; SIGTERM/SIGINT/SIGHUP are passed on.
#include "worker/node_agent.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "common/error.h"
#include "common/spawn.h"
#include "contract/world_info.h"
#include "worker/grpc_entry.h"
#include "worker/relay_protocol.h"

namespace ds::worker {

namespace {

constexpr auto kSiblingGrace = std::chrono::seconds(3);
volatile sig_atomic_t gForwardSignal = 0;
void onSignal(int signal) { gForwardSignal = signal; }

int statusOf(int waitStatus) {
  return WIFSIGNALED(waitStatus) ? 128 + WTERMSIG(waitStatus) : WEXITSTATUS(waitStatus);
}

}  // namespace

int runNodeAgent(const std::string& workerPath, const std::vector<std::string>& workerArgs,
                 const std::string& worldInfo, int nodeRank, const std::string& relayNonce,
                 std::optional<NodeRelayOptions> relay) {
  const WorldInfo world = decodeWorldInfo(worldInfo);
  if (nodeRank < 0 || nodeRank >= static_cast<int>(world.size()))
    throw Error("--node_rank " + std::to_string(nodeRank) + ": the job has " +
                std::to_string(world.size()) + " nodes (0.." + std::to_string(world.size() - 1) +
                ")");
  const auto& [host, slots] = world[nodeRank];
  // Up before any worker starts, so that they all find it (none tries to host it) and it
  // outlives them: the agent returns only once they have exited.
  std::unique_ptr<RelayHost> relayHost;
  if (relay) {
    relay->socketName = relaySocketName(relayNonce, host);
    relay->listeningFd = listenOnRelaySocket(relay->socketName);
    if (relay->listeningFd >= 0) relayHost = grpcEntryPoints().hostRelay(std::move(*relay));
  }

  struct sigaction action {};
  action.sa_handler = onSignal;
  for (int signal : {SIGTERM, SIGINT, SIGHUP}) sigaction(signal, &action, nullptr);

  std::vector<pid_t> children;
  for (int slot : slots) {
    std::vector<std::string> args = {workerPath};
    args.insert(args.end(), workerArgs.begin(), workerArgs.end());
    args.insert(args.end(), {"--host", host, "--slot", std::to_string(slot)});
    SpawnOptions options;
    options.argv = args;
    options.ownProcessGroup = false;      // the agent's session: ssh/pdsh tear it down as one
    options.parentDeathSignal = SIGTERM;  // the worker stops its program's group, then goes
    options.label = "ds-worker node agent";
    children.push_back(spawnProcess(options).pid);
  }

  int result = 0;
  size_t running = children.size();
  bool stopping = false;
  std::chrono::steady_clock::time_point killAt{}, firstFailure{};
  while (running > 0) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      --running;
      // A reaped PID may be reused by an unrelated process: never signal it again.
      children.erase(std::remove(children.begin(), children.end(), pid), children.end());
      if (statusOf(status) != 0 && result == 0) result = statusOf(status);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    const auto now = std::chrono::steady_clock::now();
    if (result != 0 && firstFailure == std::chrono::steady_clock::time_point{}) firstFailure = now;
    // A failed rank: the coordinator sees it and aborts every rank, so the others normally leave on
    // their own within a second, each reporting why; that keeps the blame on the rank that died.
    // Only if they linger (or we are told to stop) are they terminated here.
    const bool lingering = result != 0 && now - firstFailure > kSiblingGrace;
    if (!stopping && (lingering || gForwardSignal != 0)) {
      stopping = true;
      if (result == 0) result = 128 + gForwardSignal;
      for (pid_t child : children) kill(child, SIGTERM);
      killAt = now + std::chrono::seconds(2);
    }
    if (stopping && std::chrono::steady_clock::now() > killAt)
      for (pid_t child : children) kill(child, SIGKILL);
  }
  return result;
}

}  // namespace ds::worker
