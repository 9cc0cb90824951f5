// CollectiveTracker: what the heartbeat reports as the collective a rank is in. The tracker's own
// rules (outermost op only, every thread, longest first), then through real communicators: a
// hierarchical world's ranks waiting for a late peer are seen in its all_reduce, on "world".
#include <atomic>
#include <catch2/catch.hpp>
#include <mutex>
#include <thread>

#include "runtime/comm/collective_tracker.h"
#include "test/comm_harness.h"

using namespace ds;
using namespace ds::runtime;
using namespace std::chrono_literals;

TEST_CASE("collective tracker: an op is reported from its start until its end") {
  CollectiveTracker tracker;
  const uint32_t world = CollectiveTracker::internGroup("world");
  REQUIRE(CollectiveTracker::internGroup("world") == world);
  REQUIRE(CollectiveTracker::groupName(world) == "world");
  REQUIRE(tracker.active().empty());
  const auto before = std::chrono::steady_clock::now();
  {
    const CollectiveTracker::Scope scope(tracker, CollectiveOp::ReduceScatter, world);
    const auto in = tracker.longest();
    REQUIRE(in);
    REQUIRE(in->op == CollectiveOp::ReduceScatter);
    REQUIRE(in->group == "world");
    // Kept in whole milliseconds after the tracker's creation.
    REQUIRE(in->since >= before - 1ms);
    REQUIRE(in->since <= std::chrono::steady_clock::now());
  }
  REQUIRE_FALSE(tracker.longest());
}

TEST_CASE("collective tracker: only a thread's outermost op is reported") {
  CollectiveTracker tracker;
  const uint32_t outer = CollectiveTracker::internGroup("world");
  const uint32_t inner = CollectiveTracker::internGroup("world: node 0");
  {
    const CollectiveTracker::Scope scope(tracker, CollectiveOp::AllReduce, outer);
    {
      const CollectiveTracker::Scope nested(tracker, CollectiveOp::Broadcast, inner);
      REQUIRE(tracker.active().size() == 1);
      REQUIRE(tracker.longest()->op == CollectiveOp::AllReduce);
      REQUIRE(tracker.longest()->group == "world");
    }
    REQUIRE(tracker.longest()->op == CollectiveOp::AllReduce);
    {
      const CollectiveTracker::Scope again(tracker, CollectiveOp::Barrier, inner);
      REQUIRE(tracker.active().size() == 1);
    }
  }
  REQUIRE(tracker.active().empty());
}

TEST_CASE("collective tracker: every thread's op is reported, the longest-running first") {
  CollectiveTracker tracker;
  const uint32_t group = CollectiveTracker::internGroup("ranks 0,1");
  std::atomic<bool> entered{false}, release{false};
  std::thread other([&] {
    const CollectiveTracker::Scope scope(tracker, CollectiveOp::Recv, group);
    entered = true;
    while (!release) std::this_thread::sleep_for(1ms);
  });
  while (!entered) std::this_thread::sleep_for(1ms);
  std::this_thread::sleep_for(5ms);  // a later start, in the tracker's milliseconds
  {
    const CollectiveTracker::Scope scope(tracker, CollectiveOp::Send, group);
    const auto active = tracker.active();
    REQUIRE(active.size() == 2);
    REQUIRE(active[0].op == CollectiveOp::Recv);
    REQUIRE(active[1].op == CollectiveOp::Send);
    REQUIRE(tracker.longest()->op == CollectiveOp::Recv);
  }
  release = true;
  other.join();
  REQUIRE(tracker.active().empty());
}

TEST_CASE("collective tracker: ranks waiting for a late peer are seen in their all_reduce") {
  // Ranks as threads of this process share its tracker: ranks 0-2 wait in the world's all_reduce
  // until the watcher has seen them there, and only then rank 3 joins them.
  std::atomic<bool> seen{false};
  std::vector<ActiveCollective> waiting;
  std::thread watcher([&] {
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (std::chrono::steady_clock::now() < deadline) {
      auto active = CollectiveTracker::process().active();
      if (active.size() == 3) {
        waiting = std::move(active);
        break;
      }
      std::this_thread::sleep_for(1ms);
    }
    seen = true;
  });
  ds::test::runGroup(ds::test::Backend::Hierarchical, {2, 2}, [&](Communicator& comm) {
    if (comm.rank() == 3)
      while (!seen) std::this_thread::sleep_for(1ms);
    float value[1] = {1.0f};
    comm.allReduce(value, 1);
    ds::test::rankCheck(value[0] == 4.0f, "the all_reduce's sum");
  });
  watcher.join();
  REQUIRE(waiting.size() == 3);
  for (const ActiveCollective& one : waiting) {
    REQUIRE(one.op == CollectiveOp::AllReduce);
    REQUIRE(one.group == "world");
  }
  REQUIRE(CollectiveTracker::process().active().empty());
}

TEST_CASE("collective tracker: a subgroup is named by its members, long lists by their ends") {
  MemoryStore store;
  std::mutex mutex;
  std::map<int, std::string> names;
  ds::test::onThreads(10, [&](int r) {
    GroupOptions options;
    options.storePrefix = "names";
    GroupFactory factory(store, {r, {10}}, options);
    const auto all = factory.group({9, 8, 7, 6, 5, 4, 3, 2, 1, 0});
    const auto few =
        factory.group(r == 0 || r == 2 || r == 4 ? std::vector<int>{4, 0, 2} : std::vector<int>{r});
    std::lock_guard lock(mutex);
    names[r] = all->groupName() + " | " + few->groupName();
  });
  REQUIRE(names[0] == "ranks 0,1,2,3,...,6,7,8,9 | ranks 0,2,4");
  REQUIRE(names[1] == "ranks 0,1,2,3,...,6,7,8,9 | ranks 1");
}
