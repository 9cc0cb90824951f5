// Subgroups: the factory picks each group's backend from where its members run, sums stay inside
// the group, non-members get no communicator, and the same member set can be made twice.
#include <catch2/catch.hpp>
#include <mutex>

#include "common/error.h"
#include "test/comm_harness.h"

using namespace ds;
using namespace ds::runtime;

TEST_CASE("groups: data-parallel subgroups over two nodes of two ranks") {
  MemoryStore store;
  std::mutex mutex;
  std::map<std::string, std::string> backends;  // "group/rank" -> backend
  std::map<std::string, float> sums;
  ds::test::onThreads(4, [&](int r) {
    GroupOptions options;
    options.bindAddress = "127.0.0.1";
    options.storePrefix = "groups";
    GroupFactory factory(store, {r, {2, 2}}, options);
    auto record = [&](const std::string& name, std::unique_ptr<Communicator> comm) {
      if (!comm) {
        std::lock_guard lock(mutex);
        backends[name + "/" + std::to_string(r)] = "none";
        return;
      }
      float value[1] = {static_cast<float>(r + 1)};
      comm->allReduce(value, 1);
      std::lock_guard lock(mutex);
      backends[name + "/" + std::to_string(r)] = comm->backendName();
      sums[name + "/" + std::to_string(r)] = value[0];
    };
    record("world", factory.world());
    record("node", factory.group(r < 2 ? std::vector<int>{0, 1} : std::vector<int>{2, 3}));
    record("even-odd", factory.group(r % 2 == 0 ? std::vector<int>{2, 0} : std::vector<int>{1, 3}));
    record("all", factory.group({3, 2, 1, 0}));
    record("all-again", factory.group({0, 1, 2, 3}));
    record("pair", factory.group({1, 2}));
  });
  for (int r = 0; r < 4; ++r) {
    const std::string k = "/" + std::to_string(r);
    REQUIRE(sums["world" + k] == 10.0f);
    REQUIRE(backends["world" + k] == "hierarchical (shared memory + gloo)");
    REQUIRE(sums["node" + k] == (r < 2 ? 3.0f : 7.0f));
    REQUIRE(backends["node" + k] == "shared memory");
    REQUIRE(sums["even-odd" + k] == (r % 2 == 0 ? 4.0f : 6.0f));
    REQUIRE(backends["even-odd" + k] == "gloo (tcp)");
    REQUIRE(sums["all" + k] == 10.0f);
    REQUIRE(sums["all-again" + k] == 10.0f);
    if (r == 1 || r == 2) {
      REQUIRE(sums["pair" + k] == 5.0f);
    } else {
      REQUIRE(backends["pair" + k] == "none");
    }
  }
}

TEST_CASE("groups: bad member lists and impossible backends are clear errors") {
  MemoryStore store;
  GroupOptions options;
  options.storePrefix = "bad";
  GroupFactory factory(store, {0, {2, 2}}, options);
  REQUIRE_THROWS_WITH(factory.group({0, 0}), Catch::Contains("rank 0 is listed twice"));
  REQUIRE_THROWS_WITH(factory.group({0, 4}),
                      Catch::Contains("rank 4 is not a rank of this job of 4"));
  REQUIRE_THROWS_WITH(factory.group({}), Catch::Contains("no ranks"));
  options.backend = CommBackend::Shm;
  GroupFactory shmOnly(store, {0, {2, 2}}, options);
  REQUIRE_THROWS_WITH(shmOnly.group({0, 2}), Catch::Contains("spans 2 hosts"));
  REQUIRE_THROWS_WITH(parseCommBackend("nccl2", "comm_backend"),
                      Catch::Contains("comm_backend: expected \"auto\", \"shm\", \"hierarchical\" "
                                      "or \"gloo\", got \"nccl2\""));
}
