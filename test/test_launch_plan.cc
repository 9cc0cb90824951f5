// Launch planning: host and slot selection, rank numbering, loopback detection.
#include <catch2/catch.hpp>

#include "launcher/launch_plan.h"
#include "runtime/common/error.h"

using namespace ds::launcher;

namespace {
const std::vector<HostEntry> kPool = {
    {"worker-0", 4}, {"worker-1", 2}, {"worker-2", 0}, {"worker-3", 4}};
}

TEST_CASE("plan: ranks follow hostfile order, then slot order; hosts with 0 slots are skipped") {
  const LaunchPlan plan = makeLaunchPlan(kPool, {});
  REQUIRE(plan.worldSize() == 10);
  REQUIRE(plan.hosts.size() == 3);
  REQUIRE(plan.ranks[4].host == "worker-1");
  REQUIRE(plan.ranks[4].slot == 0);
  REQUIRE(plan.ranks[4].rank == 4);
  REQUIRE(plan.ranks[5].localRank == 1);
  REQUIRE(plan.ranks[5].localSize == 2);
  REQUIRE(plan.ranks[6].host == "worker-3");
}

TEST_CASE("plan: --num_nodes takes the first hosts and --num_gpus the first slots of each") {
  const LaunchPlan plan = makeLaunchPlan(kPool, {2, 2});
  REQUIRE(plan.worldSize() == 4);
  REQUIRE(plan.ranks[2].host == "worker-1");
  REQUIRE(plan.ranks[3].slot == 1);
  REQUIRE(plan.ranks[3].localSize == 2);
}

TEST_CASE("plan: impossible selections are errors naming the flag and the host") {
  REQUIRE_THROWS_WITH(makeLaunchPlan(kPool, {5, -1}),
                      Catch::Contains("--num_nodes 5") && Catch::Contains("only 4 hosts"));
  REQUIRE_THROWS_WITH(makeLaunchPlan(kPool, {-1, 3}), Catch::Contains("worker-1 has only 2 slots"));
  REQUIRE_THROWS_WITH(makeLaunchPlan(kPool, {0, -1}), Catch::Contains("--num_nodes"));
  REQUIRE_THROWS_WITH(makeLaunchPlan(kPool, {-1, 0}), Catch::Contains("--num_gpus"));
  REQUIRE_THROWS_WITH(makeLaunchPlan({{"w", 0}}, {}), Catch::Contains("no slots selected"));
}

TEST_CASE("plan: loopback hosts are recognised") {
  for (const char* host : {"localhost", "127.0.0.1", "127.0.0.2", "127.255.0.9", "::1"}) {
    INFO(host);
    REQUIRE(isLoopbackHost(host));
  }
  for (const char* host : {"worker-0", "10.0.0.1", "128.0.0.1", "localhost2", "127.0.0"}) {
    INFO(host);
    REQUIRE_FALSE(isLoopbackHost(host));
  }
}
