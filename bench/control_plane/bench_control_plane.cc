// bench_control_plane: the coordinator at scale. A real Coordinator runs in a child process (so
// that its CPU seconds, peak RSS and threads are its own); this process plays N x R ranks that do
// over real sockets what ds-workers do: each rank joins, opens its Watch stream, publishes a
// bootstrap address and reads the ones it needs (node leaders read every other leader's, as the
// inter-node full mesh does: one KvGet per peer as Gloo's rendezvous does, or with --batched one
// KvMultiGet; the other ranks read their leader's), heartbeats every interval, and finally
// receives an abort.
// By default each node has a real NodeRelay (worker/node_relay.h) holding the node's one
// connection, and its ranks speak to it over Unix sockets, as ds-workers do; relays and ranks all
// run on one io_context thread here. With --direct every rank has its own gRPC connection and
// Watch stream instead (driven by gRPC's callback API), as before relays existed: the baseline.
// Prints: time from start to every rank ready, coordinator CPU and peak RSS, its threads, its CPU
// share per second of wall time while every rank heartbeats, the time for the supervisor's check
// to see a node that went silent, and the time for an abort to reach every rank.
// Usage: bench_control_plane [--nodes N] [--ranks-per-node R] [--heartbeat-ms MS]
//                            [--heartbeat-timeout-ms MS] [--measure-s S] [--batched] [--direct]
//                            [--json]
#include <grpcpp/grpcpp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_cli.h"
#include "bench/control_plane/sim_routes.h"
#include "common/json_line.h"
#include "common/guarded_main.h"
#include "coordinator.grpc.pb.h"
#include "grpc_process.h"
#include "launcher/coordinator.h"
#include "common/allocator_policy.h"
#include "worker/coordinator_channel.h"
#include "worker/node_relay.h"
#include "worker/relay_protocol.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr char kToken[] = "bench-control-plane-token";
// The supervisor's check interval (launcher/job_supervisor.cc).
constexpr auto kSupervisorTick = std::chrono::milliseconds(50);

struct Options {
  long nodes = 8, ranksPerNode = 8, heartbeatMs = 1000, heartbeatTimeoutMs = 3000, measureS = 5;
  bool json = false, batched = false, direct = false;
  long ranks() const { return nodes * ranksPerNode; }
};

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

// Lines over the socket pair between this process and the coordinator's.
void writeLine(int fd, const std::string& line) {
  const std::string text = line + "\n";
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n <= 0) throw ds::Error("bench_control_plane: the control socket closed");
    done += static_cast<size_t>(n);
  }
}

std::string readLine(int fd) {
  std::string line;
  char c = 0;
  while (true) {
    const ssize_t n = read(fd, &c, 1);
    if (n <= 0) throw ds::Error("bench_control_plane: the coordinator process went away");
    if (c == '\n') return line;
    line += c;
  }
}

// The threads of this process: one entry each under /proc/self/task.
long threadCount() {
  long n = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/task"))
    ++n;
  return n;
}

std::vector<ds::RankPlacement> plan(const Options& o) {
  std::vector<ds::RankPlacement> ranks;
  for (int node = 0; node < o.nodes; ++node)
    for (int slot = 0; slot < o.ranksPerNode; ++slot)
      ranks.push_back({static_cast<int>(ranks.size()), "node-" + std::to_string(node), slot, slot,
                       static_cast<int>(o.ranksPerNode), node, static_cast<int>(o.nodes)});
  return ranks;
}

// The coordinator process: serves the job and answers the bench's requests on `control`.
int runCoordinator(const Options& o, int control) {
  ds::launcher::CoordinatorOptions c;
  c.bindAddress = "127.0.0.1";
  c.token = kToken;
  c.configJson = "{}";
  c.ranks = plan(o);
  c.heartbeatInterval = std::chrono::milliseconds(o.heartbeatMs);
  c.heartbeatTimeout = std::chrono::milliseconds(o.heartbeatTimeoutMs);
  ds::launcher::Coordinator coordinator(c);
  writeLine(control, std::to_string(coordinator.port()));
  while (true) {
    const std::string request = readLine(control);
    if (request == "stats") {
      rusage usage{};
      getrusage(RUSAGE_SELF, &usage);
      const double cpu = usage.ru_utime.tv_sec + usage.ru_utime.tv_usec / 1e6 +
                         usage.ru_stime.tv_sec + usage.ru_stime.tv_usec / 1e6;
      // ru_maxrss: the peak resident set, in KiB.
      writeLine(control, std::to_string(cpu) + " " + std::to_string(usage.ru_maxrss) + " " +
                             std::to_string(threadCount()));
    } else if (request.rfind("silent ", 0) == 0) {
      // As the supervisor does: a snapshot every tick, a rank silent for the timeout is lost.
      const int node = std::stoi(request.substr(7));
      while (true) {
        const auto health = coordinator.snapshot();
        const auto now = Clock::now();
        bool all = true;
        for (long r = node * o.ranksPerNode; r < (node + 1) * o.ranksPerNode; ++r)
          all = all && now - health[r].lastHeartbeat > c.heartbeatTimeout;
        if (all) break;
        std::this_thread::sleep_for(kSupervisorTick);
      }
      writeLine(control, std::to_string(nowNs()));
    } else if (request == "abort") {
      const int64_t at = nowNs();
      coordinator.broadcast(ds::CommandKind::Abort, "bench_control_plane");
      writeLine(control, std::to_string(at));
    } else {
      coordinator.shutdown();
      return 0;
    }
  }
}

// ---- the simulated ranks ----

namespace asio = boost::asio;
using ds::bench::Route;
using ds::worker::CoordinatorMethod;

struct Tally {
  std::mutex mutex;
  std::condition_variable changed;
  long ready = 0, aborted = 0, watchesDone = 0, failures = 0;
  int64_t lastReadyNs = 0, lastAbortNs = 0;
  std::string firstError;
  void fail(const std::string& what) {
    std::lock_guard lock(mutex);
    if (failures++ == 0) firstError = what;
    changed.notify_all();
  }
  void abortArrived() {
    std::lock_guard lock(mutex);
    ++aborted;
    lastAbortNs = std::max(lastAbortNs, nowNs());
    changed.notify_all();
  }
  void watchEnded() {
    std::lock_guard lock(mutex);
    ++watchesDone;
    changed.notify_all();
  }
};

// What a ds-worker does, over either route.
class SimRank {
 public:
  SimRank(std::shared_ptr<Route> route, int rank, const Options& o, Tally& tally)
      : route_(std::move(route)), rank_(rank), node_(rank / o.ranksPerNode), o_(o), tally_(tally) {}

  void start() { join(); }
  void heartbeat() {
    ds::proto::HeartbeatRequest request;
    auth(request.mutable_auth());
    request.set_rank(rank_);
    request.set_state(ds::proto::WORKER_STATE_TRAINING);
    request.set_step(++beats_);
    request.set_phase("forward");
    call(CoordinatorMethod::Heartbeat, request, [](const std::string&) {});
  }
  void cancelWatch() { route_->cancelWatch(); }
  bool leader() const { return rank_ % o_.ranksPerNode == 0; }
  int node() const { return node_; }

 private:
  void auth(ds::proto::JobAuth* a) const {
    a->set_token(kToken);
    a->set_epoch(epoch_);
  }
  static std::string addressKey(long rank) { return "bench/addr/" + std::to_string(rank); }

  template <class Then>
  void call(CoordinatorMethod method, const google::protobuf::Message& request, Then then) {
    route_->call(method, request.SerializeAsString(),
                 [this, method, then](int code, const std::string& reply) {
                   if (code != 0)
                     return tally_.fail(std::string(ds::worker::methodName(method)) + ": " + reply);
                   then(reply);
                 });
  }

  void join() {
    ds::proto::JoinRequest request;
    request.mutable_auth()->set_token(kToken);
    request.set_host("node-" + std::to_string(node_));
    request.set_local_slot(static_cast<int>(rank_ % o_.ranksPerNode));
    request.set_pid(rank_);
    call(CoordinatorMethod::Join, request, [this](const std::string& bytes) {
      ds::proto::JoinReply reply;
      reply.ParseFromString(bytes);
      epoch_ = reply.epoch();
      ds::proto::WatchRequest watch;
      auth(watch.mutable_auth());
      watch.set_rank(rank_);
      route_->watch(
          watch.SerializeAsString(),
          [this](const std::string& bytes) {
            ds::proto::Command command;
            if (command.ParseFromString(bytes) && command.kind() == ds::proto::Command::ABORT)
              tally_.abortArrived();
          },
          [this] { tally_.watchEnded(); });
      publish();
    });
  }

  void publish() {
    ds::proto::KvSetRequest request;
    auth(request.mutable_auth());
    request.set_key(addressKey(rank_));
    request.set_value("127.0.0.1:" + std::to_string(20000 + rank_));
    call(CoordinatorMethod::KvSet, request, [this](const std::string&) {
      if (leader() && o_.batched) {
        readAllLeaders();
      } else if (leader()) {
        nextPeer_ = 0;
        readNextLeader();
      } else {
        read(node_ * o_.ranksPerNode, [this] { ready(); });
      }
    });
  }

  // A leader reads every other leader's address, one after the other (Gloo's full mesh).
  void readNextLeader() {
    if (nextPeer_ == node_) ++nextPeer_;
    if (nextPeer_ >= o_.nodes) return ready();
    const long peer = nextPeer_++ * o_.ranksPerNode;
    read(peer, [this] { readNextLeader(); });
  }

  // Batched: every other leader's address in one call.
  void readAllLeaders() {
    ds::proto::KvMultiGetRequest request;
    auth(request.mutable_auth());
    for (long node = 0; node < o_.nodes; ++node)
      if (node != node_) request.add_keys(addressKey(node * o_.ranksPerNode));
    request.set_timeout_ms(5 * 60 * 1000);
    call(CoordinatorMethod::KvMultiGet, request, [this](const std::string&) { ready(); });
  }

  template <class Then>
  void read(long rank, Then then) {
    ds::proto::KvGetRequest request;
    auth(request.mutable_auth());
    request.set_key(addressKey(rank));
    request.set_timeout_ms(5 * 60 * 1000);
    call(CoordinatorMethod::KvGet, request, [then](const std::string&) { then(); });
  }

  void ready() {
    std::lock_guard lock(tally_.mutex);
    ++tally_.ready;
    tally_.lastReadyNs = std::max(tally_.lastReadyNs, nowNs());
    tally_.changed.notify_all();
  }

  std::shared_ptr<Route> route_;
  int rank_, node_;
  const Options& o_;
  Tally& tally_;
  uint64_t epoch_ = 0;
  long nextPeer_ = 0;
  int64_t beats_ = 0;
};

struct CoordinatorStats {
  double cpu = 0;
  double rssMiB = 0;
  long threads = 0;
};

CoordinatorStats stats(int control) {
  writeLine(control, "stats");
  std::istringstream fields(readLine(control));
  CoordinatorStats s;
  long rssKiB = 0;
  fields >> s.cpu >> rssKiB >> s.threads;
  s.rssMiB = rssKiB / 1024.0;
  return s;
}

template <class Predicate>
bool waitFor(Tally& tally, std::chrono::seconds limit, Predicate done) {
  std::unique_lock lock(tally.mutex);
  return tally.changed.wait_for(lock, limit, [&] { return done() || tally.failures > 0; }) &&
         tally.failures == 0;
}

int run(const Options& o) {
  // Thousands of connections: one descriptor each, on both sides.
  rlimit files{};
  getrlimit(RLIMIT_NOFILE, &files);
  // Direct: a connection per rank. Relays: both ends of each rank's Unix socket, and per node a
  // listening socket and a connection.
  const rlim_t wanted =
      static_cast<rlim_t>(o.direct ? o.ranks() : 2 * o.ranks() + 2 * o.nodes) + 1024;
  if (files.rlim_max < wanted)
    throw ds::Error(std::to_string(o.ranks()) + " ranks need " + std::to_string(wanted) +
                    " file descriptors; the hard limit is " + std::to_string(files.rlim_max) +
                    " (raise it with ulimit -Hn as root, or simulate fewer ranks)");
  files.rlim_cur = std::max(files.rlim_cur, wanted);
  setrlimit(RLIMIT_NOFILE, &files);

  int pair[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0)
    throw ds::Error("bench_control_plane: socketpair failed");
  const int64_t startNs = nowNs();
  const pid_t child = fork();  // before any gRPC state exists in this process
  if (child < 0) throw ds::Error("bench_control_plane: fork failed");
  if (child == 0) {
    close(pair[0]);
    int status = 1;
    try {
      status = runCoordinator(o, pair[1]);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "bench_control_plane: coordinator: %s\n", e.what());
    }
    _exit(status);
  }
  close(pair[1]);
  const int control = pair[0];
  const std::string address = "127.0.0.1:" + readLine(control);
  ds::prepareGrpcProcess();  // the simulated workers' settings, as ds-worker's
  // As the coordinator does: thousands of connections allocate and free the same sizes, and
  // growing the heap again costs page faults (sysmalloc was 6% of this process's start-up).
  ds::keepFreedMemoryForReuse();

  Tally tally;
  // Relay mode: one NodeRelay per node, all on one io_context with their ranks' local sockets.
  asio::io_context io;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  work.emplace(io.get_executor());
  std::thread ioThread([&] { io.run(); });
  std::vector<std::unique_ptr<ds::worker::NodeRelay>> relays;
  std::vector<std::unique_ptr<SimRank>> ranks;
  const std::string nonce = "bench-" + std::to_string(getpid());
  for (int r = 0; r < o.ranks(); ++r) {
    std::shared_ptr<Route> route;
    if (o.direct) {
      route = ds::bench::directRoute(address);
    } else {
      const std::string node = "node-" + std::to_string(r / o.ranksPerNode);
      const std::string socket = ds::worker::relaySocketName(nonce, node);
      if (r % o.ranksPerNode == 0)
        relays.push_back(std::make_unique<ds::worker::NodeRelay>(
            io, ds::worker::NodeRelayOptions{socket, address, kToken, {}}));
      route = ds::bench::relayRoute(io, socket);
    }
    ranks.push_back(std::make_unique<SimRank>(route, r, o, tally));
  }
  // Each rank's work runs where its route's callbacks do: gRPC's threads, or the io thread.
  auto onRankThread = [&](std::function<void()> work) {
    if (o.direct)
      work();
    else
      asio::post(io, std::move(work));
  };
  for (auto& rank : ranks) onRankThread([r = rank.get()] { r->start(); });
  const bool allReady =
      waitFor(tally, std::chrono::seconds(600), [&] { return tally.ready == o.ranks(); });
  const double readyS = (tally.lastReadyNs - startNs) / 1e9;
  CoordinatorStats peak = stats(control);
  auto keepPeak = [&](const CoordinatorStats& s) {
    peak.cpu = s.cpu;
    peak.rssMiB = std::max(peak.rssMiB, s.rssMiB);
    peak.threads = std::max(peak.threads, s.threads);
  };

  // Heartbeats from every rank each interval, spread over it as independent workers' would be;
  // node 0 falls silent on request.
  std::atomic<bool> stopBeats{false}, silenceNode0{false};
  std::atomic<int64_t> node0LastBeatNs{0};
  std::thread beater([&] {
    constexpr int kSlices = 20;
    const auto slice = std::chrono::milliseconds(o.heartbeatMs) / kSlices;
    auto next = Clock::now();
    for (long tick = 0; !stopBeats; ++tick) {
      const long s = tick % kSlices;
      for (long r = s; r < o.ranks(); r += kSlices) {
        if (ranks[r]->node() == 0 && silenceNode0) continue;
        onRankThread([rank = ranks[r].get()] { rank->heartbeat(); });
        if (ranks[r]->node() == 0) node0LastBeatNs = nowNs();
      }
      next += slice;
      std::this_thread::sleep_until(next);
    }
  });
  double heartbeatFraction = 0, detectS = 0, abortS = 0;
  if (allReady) {
    std::this_thread::sleep_for(std::chrono::milliseconds(o.heartbeatMs));  // steady state
    const CoordinatorStats before = stats(control);
    keepPeak(before);
    std::this_thread::sleep_for(std::chrono::seconds(o.measureS));
    const CoordinatorStats after = stats(control);
    keepPeak(after);
    heartbeatFraction = (after.cpu - before.cpu) / static_cast<double>(o.measureS);

    silenceNode0 = true;
    std::this_thread::sleep_for(kSupervisorTick * 2);  // its last beats are out
    writeLine(control, "silent 0");
    detectS = (std::stoll(readLine(control)) - node0LastBeatNs) / 1e9;

    writeLine(control, "abort");
    const int64_t abortAt = std::stoll(readLine(control));
    if (waitFor(tally, std::chrono::seconds(60), [&] { return tally.aborted == o.ranks(); }))
      abortS = (tally.lastAbortNs - abortAt) / 1e9;
    keepPeak(stats(control));
  }
  stopBeats = true;
  beater.join();
  writeLine(control, "exit");
  for (auto& rank : ranks) onRankThread([r = rank.get()] { r->cancelWatch(); });
  waitFor(tally, std::chrono::seconds(60), [&] { return tally.watchesDone == tally.ready; });
  int status = 0;
  waitpid(child, &status, 0);
  close(control);
  ds::worker::closeRelays(std::move(relays));
  asio::post(io, [&] { ranks.clear(); });
  work.reset();
  ioThread.join();
  if (!allReady || tally.failures > 0)
    throw ds::Error("bench_control_plane: " + std::to_string(tally.ready) + " of " +
                    std::to_string(o.ranks()) + " ranks got ready" +
                    (tally.firstError.empty() ? "" : "; first error: " + tally.firstError));

  if (o.json) {
    using ds::rounded;
    ds::printJsonLine({{"ranks", o.ranks()},
                              {"nodes", o.nodes},
                              {"relays", !o.direct},
                              {"ready_s", rounded(readyS, 3)},
                              {"coordinator_cpu_s", rounded(peak.cpu, 2)},
                              {"coordinator_rss_mib", std::lround(peak.rssMiB)},
                              {"threads", peak.threads},
                              {"heartbeat_core_fraction", rounded(heartbeatFraction, 4)},
                              {"detect_silent_node_s", rounded(detectS, 3)},
                              {"abort_all_s", rounded(abortS, 3)}});
    return 0;
  }
  std::printf(
      "bench_control_plane: %ld ranks (%ld nodes x %ld), %s, "
      "heartbeat every %ld ms, timeout %ld ms, leaders read %s\n",
      o.ranks(), o.nodes, o.ranksPerNode,
      o.direct ? "one connection per rank" : "one relay and connection per node", o.heartbeatMs,
      o.heartbeatTimeoutMs, o.batched ? "in one KvMultiGet" : "one KvGet per peer");
  std::printf("  every rank ready          %8.3f s   (join, watch, publish, read the addresses)\n",
              readyS);
  std::printf("  coordinator               %8.2f CPU s, peak RSS %.0f MiB, %ld threads\n", peak.cpu,
              peak.rssMiB, peak.threads);
  std::printf("  heartbeat load            %8.1f %% of one core (target < 10%% at 8192 ranks)\n",
              100 * heartbeatFraction);
  std::printf("  silent node detected in   %8.3f s   (timeout %.3f s)\n", detectS,
              o.heartbeatTimeoutMs / 1e3);
  std::printf("  abort reached every rank  %8.3f s   (target < 1 s)\n", abortS);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return ds::guardedMain("bench_control_plane", [&] {
    Options o;
    CLI::App app{
        "bench_control_plane: the coordinator under thousands of simulated ranks: "
        "rendezvous, heartbeats, detection, abort"};
    ds::bench::showDefaults(app);
    app.add_option("--nodes", o.nodes, "simulated nodes")->check(CLI::Range(1L, 4096L));
    app.add_option("--ranks-per-node", o.ranksPerNode, "ranks on each node")
        ->check(CLI::Range(1L, 64L));
    app.add_option("--heartbeat-ms", o.heartbeatMs, "heartbeat interval")
        ->check(CLI::Range(20L, 60000L));
    app.add_option("--heartbeat-timeout-ms", o.heartbeatTimeoutMs, "heartbeat timeout")
        ->check(CLI::Range(100L, 600000L));
    app.add_option("--measure-s", o.measureS, "seconds of steady heartbeats measured")
        ->check(CLI::Range(1L, 600L));
    app.add_flag("--batched", o.batched, "leaders read their peers' addresses in one KvMultiGet");
    app.add_flag("--direct", o.direct,
                 "one gRPC connection per rank instead of one relay per node");
    app.add_flag("--json", o.json, "print one JSON line");
    if (auto status = ds::parseCommandLine(app, argc, argv)) return *status;
    return run(o);
  });
}
