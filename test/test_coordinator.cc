// The coordinator over real gRPC on loopback, driven by the worker's CoordinatorClient: rank
// assignment, refusals (token, epoch-less duplicates, unknown slots), the KV store with timeouts,
// heartbeats, reports and the command stream.
#include <atomic>
#include <catch2/catch.hpp>
#include <filesystem>
#include <future>
#include <thread>

#include "common/error.h"
#include "launcher/coordinator.h"
#include "worker/coordinator_client.h"

using namespace ds::launcher;
using namespace ds::worker;
using ds::CommandKind;
using ds::RankReport;
using ds::RankState;
using ds::TlsFiles;
using namespace std::chrono_literals;

namespace {

CoordinatorOptions twoRankOptions() {
  CoordinatorOptions options;
  options.bindAddress = "127.0.0.1";
  options.port = 0;
  options.token = "secret-token-0123456789abcdef";
  options.configJson = R"({"train_batch_size": 8})";
  options.jobArgs = {"train", "--steps", "3"};
  options.ranks = {{0, "127.0.0.1", 0, 0, 1}, {1, "127.0.0.2", 0, 0, 1}};
  options.heartbeatInterval = 250ms;
  return options;
}

// A coordinator of twoRankOptions() with both ranks joined: a from 127.0.0.1, b from 127.0.0.2.
struct TwoJoinedRanks {
  Coordinator coordinator{twoRankOptions()};
  CoordinatorClient a{coordinator.address(), "secret-token-0123456789abcdef"};
  CoordinatorClient b{coordinator.address(), "secret-token-0123456789abcdef"};
  TwoJoinedRanks() {
    a.join({"127.0.0.1", 0}, 5s);
    b.join({"127.0.0.2", 0}, 5s);
  }
};

}  // namespace

TEST_CASE("coordinator: join assigns the planned rank and ships config and job args") {
  Coordinator coordinator(twoRankOptions());
  CoordinatorClient client(coordinator.address(), "secret-token-0123456789abcdef");
  const JoinResult join = client.join({"127.0.0.2", 0}, 5s);
  REQUIRE(join.rank == 1);
  REQUIRE(join.worldSize == 2);
  REQUIRE(join.configJson == R"({"train_batch_size": 8})");
  REQUIRE(join.jobArgs == std::vector<std::string>{"train", "--steps", "3"});
  REQUIRE(join.heartbeatInterval == 250ms);
  REQUIRE(coordinator.snapshot()[1].joined);
  REQUIRE_FALSE(coordinator.snapshot()[0].joined);
}

TEST_CASE("coordinator: refuses a wrong token, an unknown slot and a second join of a slot") {
  Coordinator coordinator(twoRankOptions());
  CoordinatorClient intruder(coordinator.address(), "secret-token-0123456789abcdeX");
  REQUIRE_THROWS_WITH(intruder.join({"127.0.0.1", 0}, 5s), Catch::Contains("wrong job token"));
  CoordinatorClient client(coordinator.address(), "secret-token-0123456789abcdef");
  REQUIRE_THROWS_WITH(client.join({"127.0.0.9", 0}, 5s), Catch::Contains("not part of this job"));
  REQUIRE_FALSE(coordinator.snapshot()[0].joined);
  client.join({"127.0.0.1", 0}, 5s);
  CoordinatorClient twin(coordinator.address(), "secret-token-0123456789abcdef");
  REQUIRE_THROWS_WITH(twin.join({"127.0.0.1", 0}, 5s), Catch::Contains("already joined"));
}

TEST_CASE("coordinator: requests without a join (epoch 0) or with a wrong token are refused") {
  Coordinator coordinator(twoRankOptions());
  CoordinatorClient notJoined(coordinator.address(), "secret-token-0123456789abcdef");
  REQUIRE_THROWS_WITH(notJoined.kvSet("k", "v"), Catch::Contains("stale membership epoch 0"));
  CoordinatorClient intruder(coordinator.address(), "wrong");
  REQUIRE_THROWS_WITH(intruder.kvGet("k", 10ms), Catch::Contains("wrong job token"));
}

TEST_CASE_METHOD(TwoJoinedRanks,
                 "coordinator: the KV store blocks, times out with TimeoutError and counts") {
  auto pending = std::async(std::launch::async, [&] { return b.kvGet("addr/0", 5s); });
  // The get is still waiting: it blocks until the key is set, it does not fail or return early.
  REQUIRE(pending.wait_for(300ms) == std::future_status::timeout);
  a.kvSet("addr/0", std::string("\x01\x00\x02", 3));
  REQUIRE(pending.get() == std::string("\x01\x00\x02", 3));

  const auto start = std::chrono::steady_clock::now();
  REQUIRE_THROWS_AS(b.kvGet("missing", 200ms), ds::TimeoutError);
  REQUIRE(std::chrono::steady_clock::now() - start < 3s);
  REQUIRE_THROWS_AS(b.kvWait({"addr/0", "missing"}, 100ms), ds::TimeoutError);
  REQUIRE_NOTHROW(b.kvWait({"addr/0"}, 100ms));

  REQUIRE(a.kvAdd("arrived", 1) == 1);
  REQUIRE(b.kvAdd("arrived", 1) == 2);
}

TEST_CASE_METHOD(TwoJoinedRanks,
                 "coordinator: batched KV calls set and read many keys in one round trip each") {
  auto pending = std::async(std::launch::async, [&] { return b.kvMultiGet({"k/2", "k/0"}, 5s); });
  REQUIRE(pending.wait_for(300ms) == std::future_status::timeout);  // parked until both exist
  a.kvMultiSet({{"k/0", "zero"}, {"k/1", "one"}});
  REQUIRE(pending.wait_for(200ms) == std::future_status::timeout);
  a.kvMultiSet({{"k/2", std::string("t\0o", 3)}});
  CHECK(pending.get() == std::vector<std::string>{std::string("t\0o", 3), "zero"});
  CHECK_THROWS_WITH(b.kvMultiGet({"k/1", "absent"}, 100ms),
                    Catch::Contains("\"absent\"") && !Catch::Contains("\"k/1\""));
}

TEST_CASE("coordinator: parked reads hold no server thread each") {
  Coordinator coordinator(twoRankOptions());
  CoordinatorClient a(coordinator.address(), "secret-token-0123456789abcdef");
  a.join({"127.0.0.1", 0}, 5s);
  auto threads = [] {
    size_t n = 0;
    for ([[maybe_unused]] const auto& entry :
         std::filesystem::directory_iterator("/proc/self/task"))
      ++n;
    return n;
  };
  const size_t before = threads();
  // Each read blocks one thread of this test (the client side); a server thread per parked read
  // would double that.
  constexpr int kReads = 120;
  std::vector<std::future<std::string>> reads;
  for (int i = 0; i < kReads; ++i)
    reads.push_back(std::async(std::launch::async, [&] { return a.kvGet("late", 20s); }));
  std::this_thread::sleep_for(1s);  // every read has reached the server
  const size_t parked = threads();
  a.kvSet("late", "v");
  for (auto& read : reads) CHECK(read.get() == "v");
  INFO("threads before " << before << ", with " << kReads << " parked reads " << parked);
  CHECK(parked - before < kReads + 40);
}

TEST_CASE("coordinator: heartbeats and reports show up in the snapshot") {
  Coordinator coordinator(twoRankOptions());
  CoordinatorClient client(coordinator.address(), "secret-token-0123456789abcdef");
  client.join({"127.0.0.1", 0}, 5s);
  REQUIRE(client.heartbeat({RankState::Training, 7, 0.5, 123.0, 4096, "step 7 done"}));
  auto status = coordinator.snapshot()[0];
  REQUIRE(status.progress.state == RankState::Training);
  REQUIRE(status.progress.step == 7);
  REQUIRE(status.progress.loss == 0.5);
  REQUIRE(status.progress.residentBytes == 4096);
  RankReport report;
  report.steps = 9;
  report.lastLoss = 0.25;
  client.report(report);
  status = coordinator.snapshot()[0];
  REQUIRE(status.progress.state == RankState::Finished);
  REQUIRE(status.report);
  REQUIRE(status.report->steps == 9);
  // A heartbeat that arrives after the report (a relay holds beats up to an interval, and a
  // report overtakes them) changes nothing: the report is the rank's last word.
  REQUIRE(client.heartbeat({RankState::Training, 8, 0.75, 100.0, 4096, "step 8 done"}));
  status = coordinator.snapshot()[0];
  CHECK(status.progress.state == RankState::Finished);
  CHECK(status.progress.step == 9);
  CHECK(status.progress.loss == 0.25);
}

TEST_CASE(
    "coordinator: the collective a heartbeat names shows up, its start in the coordinator's "
    "clock") {
  Coordinator coordinator(twoRankOptions());
  CoordinatorClient client(coordinator.address(), "secret-token-0123456789abcdef");
  client.join({"127.0.0.1", 0}, 5s);
  ds::Progress progress{RankState::Training, 3, 0.5, 1.0, 0, "iteration 4: forward/backward"};
  const auto entered = std::chrono::steady_clock::now() - 2s;
  progress.collective = ds::CollectiveWait{ds::CollectiveOp::AllGather, "ranks 0,1", entered};
  REQUIRE(client.heartbeat(progress));
  const auto status = coordinator.snapshot()[0];
  REQUIRE(status.progress.collective);
  CHECK(status.progress.collective->op == ds::CollectiveOp::AllGather);
  CHECK(status.progress.collective->group == "ranks 0,1");
  // Sent as the time waited (2 s), counted back from the beat's arrival: the same clock here.
  CHECK(status.progress.collective->since >= entered - 50ms);
  CHECK(status.progress.collective->since <= entered + 1s);
  // The next heartbeat outside any collective clears it.
  progress.collective.reset();
  REQUIRE(client.heartbeat(progress));
  CHECK_FALSE(coordinator.snapshot()[0].progress.collective);
}

TEST_CASE("coordinator: stop and abort reach a watcher in order, and shutdown ends the stream") {
  Coordinator coordinator(twoRankOptions());
  CoordinatorClient client(coordinator.address(), "secret-token-0123456789abcdef");
  client.join({"127.0.0.1", 0}, 5s);
  // Sent before the stream opens: a late watcher still receives every command.
  coordinator.broadcast(CommandKind::Stop, "resize");
  std::promise<std::string> aborted;
  std::promise<void> gone;
  std::atomic<bool> stoppedFirst{false};
  std::thread watcher([&] {
    client.watch([&](CommandKind kind, const std::string& reason) {
      if (kind == CommandKind::Stop) stoppedFirst = reason == "resize";
      if (kind == CommandKind::Abort) aborted.set_value(reason);
      if (kind == CommandKind::CoordinatorGone) gone.set_value();
    });
  });
  coordinator.broadcast(CommandKind::Abort, "rank 1 died");
  auto abortFuture = aborted.get_future();
  REQUIRE(abortFuture.wait_for(3s) == std::future_status::ready);
  REQUIRE(abortFuture.get() == "rank 1 died");
  REQUIRE(stoppedFirst);
  coordinator.shutdown();
  REQUIRE(gone.get_future().wait_for(3s) == std::future_status::ready);
  watcher.join();
}

TEST_CASE("coordinator: a port already in use is an error naming the address, not a shared port") {
  Coordinator first(twoRankOptions());
  CoordinatorOptions options = twoRankOptions();
  options.port = first.port();
  REQUIRE_THROWS_WITH(Coordinator(options),
                      Catch::Contains("127.0.0.1:" + std::to_string(first.port())) &&
                          Catch::Contains("--master_port"));
}

TEST_CASE("coordinator: a joining node's name obeys the hostfile's rules") {
  CoordinatorOptions options = twoRankOptions();
  options.admitOffer = [](const std::string&, int) { return std::string(); };
  Coordinator coordinator(options);
  CoordinatorClient client(coordinator.address(), options.token);
  // Each would reach ssh's option position, a shell or pdsh's host list.
  const std::pair<const char*, const char*> refused[] = {
      {"-oProxyCommand=touch /tmp/pwned", "may not start with '-'"},
      {"node;reboot", "shell metacharacter ';'"},
      {"a,b", "may not contain ','"},
      {"", "empty host name"}};
  for (const auto& [host, reason] : refused) {
    INFO(host);
    const auto [accepted, message] = client.offer(host, 1);
    CHECK_FALSE(accepted);
    CHECK(message.find(reason) != std::string::npos);
  }
  CHECK_FALSE(coordinator.hasOffers());
  CHECK(client.offer("node-9", 2).first);
  CHECK(coordinator.hasOffers());
}
