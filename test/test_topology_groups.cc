// A rank's topology groups, ranks as threads over an in-memory store: an all_reduce along each axis
// sums exactly the members DeepSpeed would group (each rank adds 2^rank, so a sum spells its
// members), group ranks are coordinates, neighbouring stages send and receive, and the tracker
// names the axis of the op a rank waits in.
#include <atomic>
#include <catch2/catch.hpp>
#include <mutex>
#include <thread>

#include "common/error.h"
#include "runtime/comm/collective_tracker.h"
#include "runtime/comm/memory_store.h"
#include "runtime/parallel/topology_groups.h"
#include "test/rank_threads.h"

using namespace ds;
using namespace ds::runtime;
using namespace std::chrono_literals;

namespace {

GroupFactory makeFactory(MemoryStore& store, int rank, const std::vector<int>& nodeSizes,
                         const std::string& prefix) {
  GroupOptions options;
  options.bindAddress = "127.0.0.1";
  options.storePrefix = prefix;
  options.timeout = 20s;
  return GroupFactory(store, {rank, nodeSizes}, options);
}

float maskOf(const std::vector<int>& ranks) {
  int mask = 0;
  for (int r : ranks) mask |= 1 << r;
  return static_cast<float>(mask);
}

struct Seen {
  float data = 0, model = 0, pipe = 0;
  int dataRank = -1, modelRank = -1, pipeRank = -1;
  std::string names;
  float fromPrev = -1;  // what the previous stage sent
  bool hasPrev = false, hasNext = false;
};

}  // namespace

TEST_CASE("topology groups: pipe 2 x data 2 x model 2 all-reduces along each axis",
          "[topology][groups]") {
  // One node (shared memory everywhere) and two nodes of four, where the pipe groups cross
  // hosts (Gloo) while the data and model groups stay inside one (shared memory).
  const std::vector<int> nodeSizes = GENERATE(std::vector<int>{8}, std::vector<int>{4, 4});
  const PipeModelDataTopology topology(/*pipe=*/2, /*model=*/2, /*data=*/2);
  // The lists DeepSpeed's PipelineParallelGrid builds for 2 x 2 x 2, by hand.
  const std::vector<std::vector<int>> dataLists = {{0, 2}, {1, 3}, {4, 6}, {5, 7}};
  const std::vector<std::vector<int>> modelLists = {{0, 1}, {2, 3}, {4, 5}, {6, 7}};
  const std::vector<std::vector<int>> pipeLists = {{0, 4}, {1, 5}, {2, 6}, {3, 7}};
  auto listOf = [](const std::vector<std::vector<int>>& lists, int rank) {
    for (const auto& list : lists)
      if (std::find(list.begin(), list.end(), rank) != list.end()) return list;
    return std::vector<int>{};
  };

  MemoryStore store;
  std::mutex mutex;
  std::map<int, Seen> seen;
  std::atomic<bool> watched{false};
  std::vector<std::string> waitingIn;  // group names the tracker showed while rank 0 waited
  std::thread watcher([&] {
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (!watched && std::chrono::steady_clock::now() < deadline) {
      for (const ActiveCollective& op : CollectiveTracker::process().active())
        if (op.group == "model (ranks 0,1)") {
          waitingIn.push_back(op.group);
          watched = true;
        }
      std::this_thread::sleep_for(1ms);
    }
    watched = true;
  });
  ds::test::onThreads(8, [&](int r) {
    GroupFactory factory = makeFactory(store, r, nodeSizes, "grid");
    TopologyGroups groups = buildTopologyGroups(factory, topology);
    Seen s;
    float value[1] = {static_cast<float>(1 << r)};
    groups.data->allReduce(value, 1);
    s.data = value[0];
    value[0] = static_cast<float>(1 << r);
    groups.pipe->allReduce(value, 1);
    s.pipe = value[0];
    // Rank 1 holds back until the watcher has seen rank 0 waiting in the model group's op.
    if (r == 1)
      while (!watched) std::this_thread::sleep_for(1ms);
    value[0] = static_cast<float>(1 << r);
    groups.model->allReduce(value, 1);
    s.model = value[0];
    s.dataRank = groups.data->rank();
    s.modelRank = groups.model->rank();
    s.pipeRank = groups.pipe->rank();
    s.names = groups.data->groupName() + " | " + groups.model->groupName() + " | " +
              groups.pipe->groupName();
    s.hasPrev = groups.prevStage != nullptr;
    s.hasNext = groups.nextStage != nullptr;
    // Stage 0 sends its rank to stage 1 over their pair (group ranks: lower stage first).
    if (groups.nextStage) {
      ds::test::rankCheck(groups.nextStage->size() == 2 && groups.nextStage->rank() == 0,
                          "the next-stage pair has this rank first");
      ds::test::rankCheck(groups.nextStage->groupName().rfind("pipe stages 0-1", 0) == 0,
                          "the pair is named by its stages: " + groups.nextStage->groupName());
      const float mine[1] = {static_cast<float>(r)};
      groups.nextStage->send(mine, 1, /*peer=*/1);
    }
    if (groups.prevStage) {
      float got[1] = {-1};
      groups.prevStage->recv(got, 1, /*peer=*/0);
      s.fromPrev = got[0];
    }
    std::lock_guard lock(mutex);
    seen[r] = s;
  });
  watched = true;
  watcher.join();

  for (int r = 0; r < 8; ++r) {
    INFO("rank " << r << " on nodes of " << nodeSizes[0]);
    const Seen& s = seen[r];
    REQUIRE(s.data == maskOf(listOf(dataLists, r)));
    REQUIRE(s.model == maskOf(listOf(modelLists, r)));
    REQUIRE(s.pipe == maskOf(listOf(pipeLists, r)));
    // A member's rank in an axis group is its coordinate on that axis.
    REQUIRE(s.dataRank == topology.getCoord(r, "data"));
    REQUIRE(s.modelRank == topology.getCoord(r, "model"));
    REQUIRE(s.pipeRank == topology.getCoord(r, "pipe"));
    const auto members = [](const std::vector<int>& l) {
      return std::to_string(l[0]) + "," + std::to_string(l[1]);
    };
    REQUIRE(s.names == "data (ranks " + members(listOf(dataLists, r)) + ") | model (ranks " +
                           members(listOf(modelLists, r)) + ") | pipe (ranks " +
                           members(listOf(pipeLists, r)) + ")");
    const bool firstStage = r < 4;
    REQUIRE(s.hasNext == firstStage);
    REQUIRE(s.hasPrev == !firstStage);
    if (!firstStage) REQUIRE(s.fromPrev == static_cast<float>(r - 4));
  }
  REQUIRE(waitingIn == std::vector<std::string>{"model (ranks 0,1)"});
}

TEST_CASE("topology groups: a four-stage pipeline passes a sum down its neighbour pairs",
          "[topology][groups]") {
  // pipe 4 x data 1 x model 1: the data and model groups are one rank each, and every middle
  // stage joins its lower pair before its upper one (the order that cannot deadlock).
  const PipeModelDataTopology topology(/*pipe=*/4, /*model=*/1, /*data=*/1);
  MemoryStore store;
  std::vector<float> lastSum(4, -1), pipeSum(4, -1);
  std::vector<int> oneRankGroups(4, 0);
  ds::test::onThreads(4, [&](int r) {
    GroupFactory factory = makeFactory(store, r, {4}, "chain");
    TopologyGroups groups = buildTopologyGroups(factory, topology);
    oneRankGroups[r] = (groups.data->size() == 1) + (groups.model->size() == 1);
    float sum[1] = {0};
    if (groups.prevStage) groups.prevStage->recv(sum, 1, /*peer=*/0);
    sum[0] += static_cast<float>(r + 1);
    if (groups.nextStage) groups.nextStage->send(sum, 1, /*peer=*/1);
    lastSum[r] = sum[0];
    float all[1] = {static_cast<float>(r + 1)};
    groups.pipe->allReduce(all, 1);
    pipeSum[r] = all[0];
  });
  REQUIRE(lastSum == std::vector<float>{1, 3, 6, 10});
  REQUIRE(pipeSum == std::vector<float>{10, 10, 10, 10});
  REQUIRE(oneRankGroups == std::vector<int>{2, 2, 2, 2});
}

TEST_CASE("topology groups: a topology of another world is refused", "[topology][groups]") {
  MemoryStore store;
  GroupFactory factory = makeFactory(store, 0, {4}, "mismatch");
  REQUIRE_THROWS_WITH(buildTopologyGroups(factory, PipeModelDataTopology(2, 2, 2)),
                      Catch::Contains("pipe 2 x data 2 x model 2 is 8 ranks, but the job has 4"));
}
