// The node relay between real CoordinatorClients (over its Unix socket) and a real coordinator
// (over gRPC on loopback): calls pass through unchanged, heartbeats arrive batched, commands
// reach every rank's watch, and a rank or a relay that goes away is seen at once.
#include <grpcpp/support/status_code_enum.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstddef>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <future>
#include <thread>

#include "common/error.h"
#include "coordinator.pb.h"
#include "launcher/coordinator.h"
#include "worker/coordinator_client.h"
#include "worker/grpc_entry.h"
#include "worker/node_relay.h"
#include "worker/relay_protocol.h"

using namespace ds::launcher;
using namespace ds::worker;
using ds::CommandKind;
using ds::RankReport;
using ds::RankState;
using namespace std::chrono_literals;

namespace {

constexpr char kToken[] = "relay-test-token-0123456789abcdef";

CoordinatorOptions oneNodeOptions() {
  CoordinatorOptions options;
  options.bindAddress = "127.0.0.1";
  options.token = kToken;
  options.configJson = "{}";
  options.jobArgs = {"barrier"};
  options.ranks = {{0, "node-a", 0, 0, 3}, {1, "node-a", 1, 1, 3}, {2, "node-a", 2, 2, 3}};
  options.heartbeatInterval = 200ms;
  return options;
}

// A name no other test (or run) uses.
std::string freshSocket(const std::string& what) {
  static std::atomic<int> counter{0};
  return relaySocketName("test-" + std::to_string(getpid()) + "-" + std::to_string(counter++),
                         what);
}

NodeRelayOptions relayOptions(const Coordinator& coordinator, const std::string& socket) {
  return {socket, coordinator.address(), kToken, {}};
}

template <class Predicate>
bool eventually(Predicate done, std::chrono::milliseconds limit = 3s) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

}  // namespace

TEST_CASE("node relay: joins, the store and reports pass through it unchanged") {
  Coordinator coordinator(oneNodeOptions());
  const std::string socket = freshSocket("node-a");
  const auto relay = hostRelay(relayOptions(coordinator, socket));
  CoordinatorClient a(coordinator.address(), kToken, ViaRelay{socket});
  CoordinatorClient b(coordinator.address(), kToken, ViaRelay{socket});
  const JoinResult joinA = a.join({"node-a", 0}, 5s);
  const JoinResult joinB = b.join({"node-a", 2}, 5s);
  CHECK(joinA.rank == 0);
  CHECK(joinB.rank == 2);
  CHECK(joinB.localSize == 3);
  CHECK(joinB.jobArgs == std::vector<std::string>{"barrier"});

  auto pending = std::async(std::launch::async, [&] { return b.kvMultiGet({"x", "y"}, 5s); });
  REQUIRE(pending.wait_for(200ms) == std::future_status::timeout);  // parked upstream
  a.kvMultiSet({{"x", "1"}, {"y", std::string("t\0o", 3)}});
  CHECK(pending.get() == std::vector<std::string>{"1", std::string("t\0o", 3)});
  a.kvSet("k", "v");
  CHECK(b.kvGet("k", 1s) == "v");
  CHECK(a.kvAdd("n", 2) == 2);
  CHECK(b.kvAdd("n", 3) == 5);
  // The coordinator's errors come back as they are: a timeout stays a TimeoutError.
  CHECK_THROWS_AS(b.kvGet("absent", 100ms), ds::TimeoutError);
  // A second join of a slot is refused by the coordinator, through the relay.
  CoordinatorClient twin(coordinator.address(), kToken, ViaRelay{socket});
  CHECK_THROWS_WITH(twin.join({"node-a", 0}, 5s), Catch::Contains("already joined"));

  RankReport report;
  report.steps = 4;
  a.report(report);
  REQUIRE(coordinator.snapshot()[0].report);
  CHECK(coordinator.snapshot()[0].report->steps == 4);
}

TEST_CASE("node relay: heartbeats reach the coordinator batched, and bad ones are refused") {
  Coordinator coordinator(oneNodeOptions());
  const std::string socket = freshSocket("node-a");
  const auto relay = hostRelay(relayOptions(coordinator, socket));
  CoordinatorClient a(coordinator.address(), kToken, ViaRelay{socket});
  CoordinatorClient b(coordinator.address(), kToken, ViaRelay{socket});
  a.join({"node-a", 0}, 5s);
  b.join({"node-a", 1}, 5s);
  REQUIRE(a.heartbeat({RankState::Training, 1, 0.5, 10.0, 4096, "forward"}));
  REQUIRE(b.heartbeat({RankState::Training, 1, 0.7, 10.0, 8192, "backward"}));
  // A first step goes up at once; a later one with the next flush (every 200 ms here).
  REQUIRE(eventually([&] { return coordinator.snapshot()[1].progress.step == 1; }));
  CHECK(coordinator.snapshot()[0].firstStepAt);
  REQUIRE(a.heartbeat({RankState::Training, 2, 0.4, 11.0, 4096, "optimizer"}));
  REQUIRE(eventually([&] { return coordinator.snapshot()[0].progress.step == 2; }));
  const auto status = coordinator.snapshot()[0];
  CHECK(status.progress.state == RankState::Training);
  CHECK(status.progress.loss == 0.4);
  CHECK(status.progress.phase == "optimizer");
  CHECK(status.progress.residentBytes == 4096);
  // Several ranks' beats in one flush: each rank's own.
  REQUIRE(a.heartbeat({RankState::Training, 3, 0.3, 11.0, 4096, "a"}));
  REQUIRE(b.heartbeat({RankState::Training, 5, 0.6, 11.0, 8192, "b"}));
  REQUIRE(eventually([&] {
    const auto ranks = coordinator.snapshot();
    return ranks[0].progress.step == 3 && ranks[1].progress.step == 5;
  }));
  CHECK(coordinator.snapshot()[0].progress.phase == "a");
  CHECK(coordinator.snapshot()[1].progress.phase == "b");
  // The collective a rank is in travels with its beat.
  ds::Progress waiting{RankState::Training, 6, 0.6, 11.0, 8192, "b"};
  waiting.collective =
      ds::CollectiveWait{ds::CollectiveOp::Barrier, "world", std::chrono::steady_clock::now()};
  REQUIRE(b.heartbeat(waiting));
  REQUIRE(eventually([&] { return coordinator.snapshot()[1].progress.step == 6; }));
  REQUIRE(coordinator.snapshot()[1].progress.collective);
  CHECK(coordinator.snapshot()[1].progress.collective->op == ds::CollectiveOp::Barrier);
  CHECK(coordinator.snapshot()[1].progress.collective->group == "world");
  CHECK_FALSE(coordinator.snapshot()[0].progress.collective);

  // A heartbeat with the wrong token, or from a connection that never joined, stops at the relay.
  CoordinatorClient intruder(coordinator.address(), "not-the-token", ViaRelay{socket});
  CHECK_FALSE(intruder.heartbeat({RankState::Training, 9, 0, 0, 0, ""}));
  CoordinatorClient stranger(coordinator.address(), kToken, ViaRelay{socket});
  CHECK_FALSE(stranger.heartbeat({RankState::Training, 9, 0, 0, 0, ""}));
  std::this_thread::sleep_for(300ms);
  CHECK(coordinator.snapshot()[2].progress.step == 0);
}

TEST_CASE("node relay: commands reach every rank's watch in order, and shutdown ends them") {
  Coordinator coordinator(oneNodeOptions());
  const std::string socket = freshSocket("node-a");
  const auto relay = hostRelay(relayOptions(coordinator, socket));
  coordinator.broadcast(CommandKind::Stop, "resize");  // before any stream: still delivered
  struct Rank {
    std::unique_ptr<CoordinatorClient> client;
    std::promise<std::string> aborted;
    std::promise<void> gone;
    std::atomic<bool> stoppedFirst{false};
    std::thread watcher;
  };
  std::vector<std::unique_ptr<Rank>> ranks;
  for (int slot = 0; slot < 3; ++slot) {
    auto rank = std::make_unique<Rank>();
    rank->client =
        std::make_unique<CoordinatorClient>(coordinator.address(), kToken, ViaRelay{socket});
    rank->client->join({"node-a", slot}, 5s);
    rank->watcher = std::thread([r = rank.get()] {
      r->client->watch([r](CommandKind kind, const std::string& reason) {
        if (kind == CommandKind::Stop) r->stoppedFirst = reason == "resize";
        if (kind == CommandKind::Abort) r->aborted.set_value(reason);
        if (kind == CommandKind::CoordinatorGone) r->gone.set_value();
      });
    });
    ranks.push_back(std::move(rank));
  }
  coordinator.broadcast(CommandKind::Abort, "rank 7 died");
  for (auto& rank : ranks) {
    auto reason = rank->aborted.get_future();
    REQUIRE(reason.wait_for(3s) == std::future_status::ready);
    CHECK(reason.get() == "rank 7 died");
    CHECK(rank->stoppedFirst);
  }
  coordinator.shutdown();
  for (auto& rank : ranks) {
    CHECK(rank->gone.get_future().wait_for(3s) == std::future_status::ready);
    rank->watcher.join();
  }
}

TEST_CASE(
    "node relay: a rank that goes before it reported is lost at once, one that reported is not") {
  Coordinator coordinator(oneNodeOptions());
  const std::string socket = freshSocket("node-a");
  const auto relay = hostRelay(relayOptions(coordinator, socket));
  auto crashed =
      std::make_unique<CoordinatorClient>(coordinator.address(), kToken, ViaRelay{socket});
  auto finished =
      std::make_unique<CoordinatorClient>(coordinator.address(), kToken, ViaRelay{socket});
  crashed->join({"node-a", 0}, 5s);
  finished->join({"node-a", 1}, 5s);
  finished->report(RankReport{});
  finished.reset();  // its connection closes after its report
  crashed.reset();   // its connection closes without one
  REQUIRE(eventually([&] { return coordinator.snapshot()[0].lost; }, 2s));
  std::this_thread::sleep_for(200ms);
  CHECK_FALSE(coordinator.snapshot()[1].lost);
  CHECK_FALSE(coordinator.snapshot()[2].lost);  // never joined: nothing to lose
}

TEST_CASE(
    "node relay: when the relay goes, its ranks' watches end and the coordinator loses them") {
  Coordinator coordinator(oneNodeOptions());
  const std::string socket = freshSocket("node-a");
  auto relay = hostRelay(relayOptions(coordinator, socket));
  // One relay per name: a second host finds it served.
  CHECK(hostRelayIfFirst(relayOptions(coordinator, socket)) == nullptr);
  CoordinatorClient client(coordinator.address(), kToken, ViaRelay{socket});
  client.join({"node-a", 2}, 5s);
  std::promise<std::string> gone;
  std::thread watcher([&] {
    client.watch([&](CommandKind kind, const std::string& reason) {
      if (kind == CommandKind::CoordinatorGone) gone.set_value(reason);
    });
  });
  REQUIRE(client.heartbeat({RankState::Training, 1, 0, 0, 0, ""}));
  REQUIRE(
      eventually([&] { return coordinator.snapshot()[2].progress.step == 1; }));  // attached by now
  relay.reset();
  auto why = gone.get_future();
  REQUIRE(why.wait_for(3s) == std::future_status::ready);
  CHECK_THAT(why.get(), Catch::Contains("node relay"));
  watcher.join();
  CHECK(eventually([&] { return coordinator.snapshot()[2].lost; }));
  CHECK_FALSE(client.heartbeat({RankState::Training, 2, 0, 0, 0, ""}));
  // With nobody serving the name, a call fails at once instead of hanging.
  CoordinatorClient late(coordinator.address(), kToken, ViaRelay{socket});
  CHECK_THROWS_WITH(late.kvSet("k", "v"), Catch::Contains("not listening"));
}

TEST_CASE("node relay: joins and sets that arrive together are answered each on its own") {
  Coordinator coordinator(oneNodeOptions());
  const std::string socket = freshSocket("node-a");
  const auto relay = hostRelay(relayOptions(coordinator, socket));
  // Four joins at once (two for slot 0): whether they go up batched or not, each gets its own
  // answer, and exactly one of the twins is refused.
  std::vector<std::unique_ptr<CoordinatorClient>> clients;
  for (int i = 0; i < 4; ++i)
    clients.push_back(
        std::make_unique<CoordinatorClient>(coordinator.address(), kToken, ViaRelay{socket}));
  const int slots[] = {0, 1, 2, 0};
  std::vector<std::future<int>> joins;
  for (int i = 0; i < 4; ++i)
    joins.push_back(std::async(std::launch::async, [&, i] {
      try {
        return clients[i]->join({"node-a", slots[i]}, 5s).rank;
      } catch (const ds::Error& e) {
        return std::string(e.what()).find("already joined") != std::string::npos ? -1 : -2;
      }
    }));
  std::vector<int> ranks;
  for (auto& join : joins) ranks.push_back(join.get());
  CHECK(ranks[1] == 1);
  CHECK(ranks[2] == 2);
  CHECK(((ranks[0] == 0 && ranks[3] == -1) || (ranks[0] == -1 && ranks[3] == 0)));
  CoordinatorClient& a = *clients[ranks[0] == 0 ? 0 : 3];

  // Sets at once, one of them over the store's 4 MiB value limit: that one alone fails.
  std::vector<std::future<bool>> sets;
  for (int i = 0; i < 6; ++i)
    sets.push_back(std::async(std::launch::async, [&, i] {
      try {
        if (i == 3)
          a.kvSet("big", std::string((4 << 20) + 1, 'x'));
        else
          clients[1 + i % 2]->kvMultiSet({{"s/" + std::to_string(i), std::to_string(i)}});
        return true;
      } catch (const ds::Error&) {
        return false;
      }
    }));
  for (int i = 0; i < 6; ++i) CHECK(sets[i].get() == (i != 3));
  for (int i = 0; i < 6; ++i)
    if (i != 3) CHECK(a.kvGet("s/" + std::to_string(i), 1s) == std::to_string(i));
}

TEST_CASE("node relay: garbage on its socket is refused and the relay serves on") {
  Coordinator coordinator(oneNodeOptions());
  const std::string socket = freshSocket("node-a");
  const auto relay = hostRelay(relayOptions(coordinator, socket));
  auto connectRaw = [&] {
    const int fd = connectToRelaySocket(socket);
    REQUIRE(fd >= 0);
    return fd;
  };
  // An unknown method and an unreadable join: each answered with an error, the connection kept.
  const int fd = connectRaw();
  FrameHeader header;
  header.call = 7;
  header.method = 200;
  writeFrame(fd, header, "junk");
  std::string payload;
  FrameHeader answer = readFrame(fd, payload);
  CHECK(answer.call == 7);
  CHECK(answer.status != 0);
  header.method = static_cast<uint8_t>(CoordinatorMethod::Join);
  header.call = 8;
  header.deadlineMs = 1000;
  writeFrame(fd, header, "\xff\xff\xff");
  answer = readFrame(fd, payload);
  CHECK(answer.call == 8);
  CHECK(answer.status != 0);
  // A watch and a heartbeat before any join: refused.
  header.method = static_cast<uint8_t>(CoordinatorMethod::Heartbeat);
  header.call = 9;
  writeFrame(fd, header, "");
  CHECK(readFrame(fd, payload).status != 0);
  ::close(fd);
  // An oversized frame: that connection is dropped.
  const int greedy = connectRaw();
  FrameHeader huge;
  huge.length = kMaxFramePayload + 1;
  REQUIRE(::send(greedy, &huge, sizeof huge, MSG_NOSIGNAL) == sizeof huge);
  char byte = 0;
  CHECK(::recv(greedy, &byte, 1, 0) == 0);  // closed by the relay
  ::close(greedy);
  // A real rank is still served.
  CoordinatorClient client(coordinator.address(), kToken, ViaRelay{socket});
  CHECK(client.join({"node-a", 1}, 5s).rank == 1);
  client.kvSet("k", "v");
  CHECK(client.kvGet("k", 1s) == "v");
}

TEST_CASE(
    "node relay: another user, connections without the token and half-sent frames cannot "
    "take its memory or descriptors") {
  Coordinator coordinator(oneNodeOptions());
  const std::string socket = freshSocket("node-a");
  const auto relay = hostRelay(relayOptions(coordinator, socket));
  // Whether the relay closed `fd` within `limit` (recv sees the end, or a reset).
  auto closedByRelay = [](int fd, int limitMs) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, limitMs) != 1) return false;
    char byte = 0;
    return ::recv(fd, &byte, 1, MSG_DONTWAIT) <= 0;
  };
  auto residentMiB = [] {
    std::ifstream status("/proc/self/status");
    for (std::string line; std::getline(status, line);)
      if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
    return 0.0;
  };

  // Another uid: closed at once, before it can send anything (root can become one; others can't).
  if (geteuid() == 0) {
    const pid_t child = fork();
    if (child == 0) {
      if (setuid(65534) != 0) _exit(2);
      const int fd = connectToRelaySocket(socket);
      if (fd < 0) _exit(3);
      pollfd p{fd, POLLIN, 0};
      char byte = 0;
      _exit(::poll(&p, 1, 3000) == 1 && ::recv(fd, &byte, 1, 0) == 0 ? 0 : 1);
    }
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }

  // 150 connections announcing 8 MiB frames and sending a little: dropped, nothing reserved.
  const double before = residentMiB();
  std::vector<int> greedy;
  for (int i = 0; i < 150; ++i) {
    const int fd = connectToRelaySocket(socket);
    REQUIRE(fd >= 0);
    FrameHeader header;
    header.length = kMaxFramePayload;
    header.method = static_cast<uint8_t>(CoordinatorMethod::KvSet);
    REQUIRE(::send(fd, &header, sizeof header, MSG_NOSIGNAL) == sizeof header);
    // The relay may refuse the announced length as soon as it has read the header, so the rest
    // can meet a closed socket: either outcome is fine, what matters is what it keeps.
    const ssize_t sent = ::send(fd, "abc", 3, MSG_NOSIGNAL);
    const int sendError = errno;
    INFO("send: " << std::strerror(sendError));
    REQUIRE((sent == 3 || (sent < 0 && (sendError == EPIPE || sendError == ECONNRESET))));
    greedy.push_back(fd);
  }
  size_t dropped = 0;
  for (int fd : greedy) dropped += closedByRelay(fd, 2000);
  for (int fd : greedy) ::close(fd);
  CHECK(dropped == greedy.size());
  INFO("resident " << before << " MiB before, " << residentMiB() << " after");
  CHECK(residentMiB() - before < 32.0);  // was 1.25 GB: each kept an 8 MiB buffer

  // 200 idle connections: only the first 64 are kept until they authenticate.
  std::vector<int> idle;
  for (int i = 0; i < 200; ++i) idle.push_back(connectToRelaySocket(socket));
  size_t closed = 0;
  std::this_thread::sleep_for(300ms);  // the relay has accepted (and closed) them all
  for (int fd : idle) closed += fd < 0 || closedByRelay(fd, 0);
  CHECK(closed == 200 - 64);
  for (int fd : idle) ::close(fd);
  REQUIRE(eventually([&] {
    const int fd = connectToRelaySocket(socket);
    const bool kept = fd >= 0 && !closedByRelay(fd, 100);
    if (fd >= 0) ::close(fd);
    return kept;
  }));
  // A request with a wrong token is refused on its connection.
  const int wrong = connectToRelaySocket(socket);
  REQUIRE(wrong >= 0);
  ds::proto::KvSetRequest set;
  set.mutable_auth()->set_token("not-the-token");
  set.set_key("k");
  FrameHeader header;
  header.call = 5;
  header.method = static_cast<uint8_t>(CoordinatorMethod::KvSet);
  header.deadlineMs = 1000;
  writeFrame(wrong, header, set.SerializeAsString());
  std::string payload;
  const FrameHeader answer = readFrame(wrong, payload);
  CHECK(answer.call == 5);
  CHECK(answer.status == grpc::StatusCode::PERMISSION_DENIED);
  ::close(wrong);
  // A real rank is served.
  CoordinatorClient client(coordinator.address(), kToken, ViaRelay{socket});
  CHECK(client.join({"node-a", 0}, 5s).rank == 0);
  client.kvSet("k", "v");
  CHECK(client.kvGet("k", 1s) == "v");
}
