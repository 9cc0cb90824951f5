// Node agent: one worker per slot through the spawn helper; children get PDEATHSIG so killing the
// agent (ssh session gone, pdsh killed) takes them along; SIGTERM/SIGINT/SIGHUP are passed on.
// Its loop is Boost.Asio's, as ds-launch's supervisor's is.
#include "worker/node_agent.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <utility>  // before asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded

#include <boost/asio.hpp>

#include "common/error.h"
#include "common/spawn.h"
#include "contract/world_info.h"
#include "worker/grpc_entry.h"
#include "worker/relay_protocol.h"

namespace ds::worker {

namespace {

namespace asio = boost::asio;

constexpr auto kSiblingGrace = std::chrono::seconds(3);
constexpr auto kKillGrace = std::chrono::seconds(2);

int statusOf(int waitStatus) {
  return WIFSIGNALED(waitStatus) ? 128 + WTERMSIG(waitStatus) : WEXITSTATUS(waitStatus);
}

// The agent's one event loop: children's exits (SIGCHLD), the signals it passes on, and the two
// grace timers, in one io_context.
class Supervision {
 public:
  explicit Supervision(asio::io_context& io)
      : signals_(io, SIGCHLD, SIGTERM, SIGINT), grace_(io), kill_(io) {
    signals_.add(SIGHUP);
  }

  // Runs until every child has been reaped; returns the agent's exit status.
  int run(asio::io_context& io, std::vector<pid_t> children) {
    children_ = std::move(children);
    running_ = children_.size();
    waitForSignal();
    reap();  // an exit before the signal handler was in place
    if (running_ > 0) io.run();
    return result_;
  }

 private:
  void waitForSignal() {
    signals_.async_wait([this](const boost::system::error_code& error, int signal) {
      if (error) return;
      if (signal == SIGCHLD)
        reap();
      else
        stop(128 + signal);
      if (running_ > 0) waitForSignal();
    });
  }

  void reap() {
    int status = 0;
    pid_t pid;
    while (running_ > 0 && (pid = waitpid(-1, &status, WNOHANG)) > 0) {
      --running_;
      // A reaped PID may be reused by an unrelated process: never signal it again.
      children_.erase(std::remove(children_.begin(), children_.end(), pid), children_.end());
      if (statusOf(status) == 0 || result_ != 0) continue;
      result_ = statusOf(status);
      // A failed rank: the coordinator sees it and aborts every rank, so the others normally
      // leave on their own within a second, each reporting why; that keeps the blame on the rank
      // that died. Only if they linger (or we are told to stop) are they terminated here.
      grace_.expires_after(kSiblingGrace);
      grace_.async_wait([this](const boost::system::error_code& error) {
        if (!error) stop(result_);
      });
    }
    if (running_ == 0) {
      signals_.cancel();
      grace_.cancel();
      kill_.cancel();
    }
  }

  void stop(int status) {
    if (stopping_) return;
    stopping_ = true;
    if (result_ == 0) result_ = status;
    for (pid_t child : children_) kill(child, SIGTERM);
    kill_.expires_after(kKillGrace);
    kill_.async_wait([this](const boost::system::error_code& error) {
      if (!error)
        for (pid_t child : children_) kill(child, SIGKILL);
    });
  }

  asio::signal_set signals_;
  asio::steady_timer grace_, kill_;
  std::vector<pid_t> children_;
  size_t running_ = 0;
  int result_ = 0;
  bool stopping_ = false;
};

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
    relayHost = hostRelayIfFirst(std::move(*relay));
  }

  asio::io_context io;
  Supervision supervision(io);  // its signal handlers are in place before any child exists
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
  return supervision.run(io, std::move(children));
}

}  // namespace ds::worker
