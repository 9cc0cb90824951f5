// Launch planning: rank numbering over selected resources, loopback detection, master address.
#include <catch2/catch.hpp>

#include "common/error.h"
#include "launcher/launch_plan.h"

using namespace ds::launcher;

TEST_CASE("plan: ranks follow host order, then slot order, local rank is the index on the node") {
  const LaunchPlan plan = makeLaunchPlan({{"a", {0, 1, 2}}, {"b", {1, 3}}, {"c", {5}}});
  REQUIRE(plan.worldSize() == 6);
  REQUIRE(plan.ranks[3].host == "b");
  REQUIRE(plan.ranks[3].slot == 1);
  REQUIRE(plan.ranks[3].localRank == 0);  // DeepSpeed's launch.py would say 3 % 2 = 1
  REQUIRE(plan.ranks[4].slot == 3);
  REQUIRE(plan.ranks[4].localRank == 1);
  REQUIRE(plan.ranks[4].localSize == 2);
  REQUIRE(plan.ranks[4].nodeRank == 1);
  REQUIRE(plan.ranks[5].nodeRank == 2);
  REQUIRE(plan.ranks[5].nodeCount == 3);
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

TEST_CASE("plan: the coordinator address defaults to the first loopback host") {
  REQUIRE(defaultMasterAddress(makeLaunchPlan({{"localhost", {0}}})) == "127.0.0.1");
  REQUIRE(defaultMasterAddress(makeLaunchPlan({{"127.0.0.2", {0}}, {"127.0.0.3", {0}}})) ==
          "127.0.0.2");
}
