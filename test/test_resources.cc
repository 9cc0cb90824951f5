// Resource selection as DeepSpeed's runner does it (DEEPSPEED-SEMANTICS.md sections 3-4), as a
// table of cases: the result in describe() form, or a fragment of the error.
#include <catch2/catch.hpp>

#include "common/error.h"
#include "launcher/resources.h"

using namespace ds::launcher;

namespace {

const Resources kPool = poolFromHostfile(
    {{"worker-0", 4}, {"worker-1", 4}, {"worker-2", 2}, {"worker-3", 0}, {"worker-4", 1}});

struct Case {
  const char* name;
  SelectionRequest request;
  const char* expected;  // describe() of the selection, or "error: <fragment>"
};

std::string run(const Resources& pool, const SelectionRequest& request) {
  try {
    return describe(selectResources(pool, request).resources);
  } catch (const ds::Error& e) {
    return std::string("error: ") + e.what();
  }
}

SelectionRequest inc(const char* include) { return {include, "", -1, -1, true, ""}; }
SelectionRequest exc(const char* exclude) { return {"", exclude, -1, -1, true, ""}; }
SelectionRequest limit(int nodes, int gpus) { return {"", "", nodes, gpus, true, ""}; }

}  // namespace

TEST_CASE("resources: selection table") {
  const Case cases[] = {
      {"everything; zero-slot host dropped from the plan",
       {},
       "worker-0:0,1,2,3@worker-1:0,1,2,3@worker-2:0,1@worker-4:0"},
      {"include one slot", inc("worker-1:0"), "worker-1:0"},
      {"include a bare host means all its slots (PR #8239)", inc("worker-0"), "worker-0:0,1,2,3"},
      {"include result follows hostfile order, not spec order", inc("worker-2:1@worker-0:3,1"),
       "worker-0:1,3@worker-2:1"},
      {"same host twice merges, sorts and de-duplicates", inc("worker-0:3@worker-0:1,3"),
       "worker-0:1,3"},
      {"bare host plus slots of the same host means those slots", inc("worker-0@worker-0:2"),
       "worker-0:2"},
      {"slot tokens are Python ints", inc("worker-0: 1,+2,03"), "worker-0:1,2,3"},
      {"leading zeros do not count towards the size", inc("worker-0:0000000001,-0000000000003"),
       "error: No slot '-3'"},
      {"many leading zeros", inc("worker-0:000000000000000002"), "worker-0:2"},
      {"a slot of ten significant digits", inc("worker-0:1000000000"),
       "error: slot '1000000000' in 'worker-0:1000000000' is not a slot number"},
      {"include slot the host lacks", inc("worker-0:7"),
       "error: --include: No slot '7' specified on host 'worker-0'"},
      {"include negative slot", inc("worker-0:-1"), "error: No slot '-1'"},
      {"include unknown host", inc("worker-9"), "error: Hostname 'worker-9' not found in hostfile"},
      {"host names are not stripped", inc("worker-0 :1"), "error: Hostname 'worker-0 ' not found"},
      {"trailing @ names the empty host", inc("worker-0@"), "error: Hostname '' not found"},
      {"two colons", inc("worker-0:1:2"), "error: has more than one ':'"},
      {"empty slot", inc("worker-0:"), "error: slot '' in 'worker-0:' is not a slot number"},
      {"trailing comma", inc("worker-0:1,"), "error: slot ''"},
      {"letters", inc("worker-0:a"), "error: slot 'a'"},
      {"parse errors come before existence errors", inc("worker-9@worker-0:x"), "error: slot 'x'"},
      {"include the zero-slot host only", inc("worker-3"), "error: no resources left"},
      {"exclude one slot", exc("worker-0:1"),
       "worker-0:0,2,3@worker-1:0,1,2,3@worker-2:0,1@worker-4:0"},
      {"exclude a whole host", exc("worker-1"), "worker-0:0,1,2,3@worker-2:0,1@worker-4:0"},
      {"exclude host and one of its slots merges to that slot (DeepSpeed's merge)",
       exc("worker-2@worker-2:1"), "worker-0:0,1,2,3@worker-1:0,1,2,3@worker-2:0@worker-4:0"},
      {"exclude a host twice is harmless", exc("worker-2@worker-2"),
       "worker-0:0,1,2,3@worker-1:0,1,2,3@worker-4:0"},
      {"exclude a slot the host lacks", exc("worker-0:5"),
       "error: --exclude: No slot '5' specified on host 'worker-0'"},
      {"exclude everything", exc("worker-0@worker-1@worker-2@worker-4"),
       "error: no resources left after --exclude"},
      {"include and exclude together",
       {"worker-0", "worker-1", -1, -1, true, ""},
       "error: mutually exclusive"},
      {"num_nodes keeps the first hosts", limit(2, -1), "worker-0:0,1,2,3@worker-1:0,1,2,3"},
      {"num_nodes counts the zero-slot host like DeepSpeed", limit(4, -1),
       "worker-0:0,1,2,3@worker-1:0,1,2,3@worker-2:0,1"},
      {"num_nodes larger than the hostfile keeps all", limit(9, -1),
       "worker-0:0,1,2,3@worker-1:0,1,2,3@worker-2:0,1@worker-4:0"},
      {"num_nodes 0 changes nothing", limit(0, -1),
       "worker-0:0,1,2,3@worker-1:0,1,2,3@worker-2:0,1@worker-4:0"},
      {"num_gpus takes slots 0..N-1 everywhere", limit(2, 2), "worker-0:0,1@worker-1:0,1"},
      {"num_gpus above a host's slots is an error (DeepSpeed invents slots)", limit(-1, 2),
       "error: --num_gpus 2: host 'worker-3' has only 0 slots"},
      {"num_gpus above a host's slots", limit(3, 3), "error: host 'worker-2' has only 2 slots"},
      {"num_nodes with include",
       {"worker-0", "", 1, -1, true, ""},
       "error: Cannot specify num_nodes/gpus with include/exclude"},
      {"num_gpus 0 with exclude counts as given",
       {"", "worker-0", -1, 0, true, ""},
       "error: Cannot specify num_nodes/gpus"},
  };
  for (const auto& c : cases) {
    INFO(c.name);
    const std::string got = run(kPool, c.request);
    const std::string expected = c.expected;
    if (expected.starts_with("error: "))
      REQUIRE_THAT(got, Catch::StartsWith("error: ") && Catch::Contains(expected.substr(7)));
    else
      REQUIRE(got == expected);
  }
}

TEST_CASE("resources: the VISIBLE_DEVICES rule applies only without a hostfile") {
  const Resources local = poolFromHostfile({{"localhost", 4}});
  SelectionRequest request;
  request.hostfileFound = false;
  request.visibleDevices = "1,3";
  Selection selection = selectResources(local, request);
  REQUIRE(describe(selection.resources) == "localhost:1,3");
  REQUIRE(selection.clearVisibleDevices);
  REQUIRE_THAT(selection.notices.at(0), Catch::Contains("setting --include=localhost:1,3"));

  request.numGpus = 2;  // an explicit selection wins; the variable is still removed
  selection = selectResources(local, request);
  REQUIRE(describe(selection.resources) == "localhost:0,1");
  REQUIRE(selection.clearVisibleDevices);
  REQUIRE_THAT(selection.notices.at(0), Catch::Contains("but ignoring it"));

  request = {};
  request.hostfileFound = false;
  request.visibleDevices = "0";
  request.numNodes = 1;  // DeepSpeed's quirk: 1 is not > 1, the include is set, then they clash
  REQUIRE_THROWS_WITH(selectResources(local, request),
                      Catch::Contains("Cannot specify num_nodes/gpus"));

  request = {};
  request.hostfileFound = false;
  request.numNodes = 2;
  REQUIRE_THROWS_WITH(selectResources(local, request),
                      Catch::Contains("no extra nodes available via hostfile"));

  request = {};
  request.visibleDevices = "1";  // with a hostfile the variable is left alone
  selection = selectResources(local, request);
  REQUIRE(describe(selection.resources) == "localhost:0,1,2,3");
  REQUIRE_FALSE(selection.clearVisibleDevices);
}

TEST_CASE("resources: with no include/exclude a zero-slot-only hostfile is a clear error") {
  REQUIRE_THROWS_WITH(selectResources(poolFromHostfile({{"w", 0}}), {}),
                      Catch::Contains("no slots selected"));
}
