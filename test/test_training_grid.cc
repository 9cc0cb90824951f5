// The GPT trainer's grid (worker/training_grid.h), ranks as threads over an in-memory store: a job
// without pipe or model parallelism gets the world as its data group and nothing else (so it runs
// as it always has), a pipe 2 x model 2 x data 2 job gets DeepSpeed's coordinates and a data
// group whose all-reduce sums exactly its data-parallel peers. What the trainer cannot run on a
// grid is the NeoX config parser's to refuse (robustness/test_setup_refusals.cc).
#include <catch2/catch.hpp>
#include <map>
#include <mutex>

#include "runtime/comm/memory_store.h"
#include "test/rank_threads.h"
#include "worker/training_grid.h"

using namespace ds;
using namespace ds::runtime;
using namespace std::chrono_literals;

namespace {

GroupFactory makeFactory(MemoryStore& store, int rank, int world) {
  GroupOptions options;
  options.bindAddress = "127.0.0.1";
  options.storePrefix = "training-grid";
  options.timeout = 20s;
  return GroupFactory(store, {rank, {world}}, options);
}

struct Seen {
  worker::TrainingGrid grid;  // pointers compared by nullness only, after the groups are gone
  bool dataIsWorld = false;
  float dataSum = 0;
};

std::map<int, Seen> runGrid(int world, int pipe, int model) {
  MemoryStore store;
  std::mutex mutex;
  std::map<int, Seen> seen;
  ds::test::onThreads(world, [&](int r) {
    GroupFactory factory = makeFactory(store, r, world);
    const std::unique_ptr<Communicator> worldComm = factory.world();
    ParallelConfig parallel;
    parallel.pipe = pipe;
    parallel.model = model;
    const worker::TrainingGridGroups groups(factory, *worldComm, parallel, nullptr);
    Seen s;
    s.grid = groups.grid();
    s.dataIsWorld = s.grid.data == worldComm.get();
    float value[1] = {static_cast<float>(1 << r)};
    s.grid.data->allReduce(value, 1);
    s.dataSum = value[0];
    std::lock_guard lock(mutex);
    seen[r] = s;
  });
  return seen;
}

}  // namespace

TEST_CASE("training grid: without pipe or model parallelism the data group is the world",
          "[grid]") {
  const auto seen = runGrid(3, 1, 1);
  for (const auto& [rank, s] : seen) {
    INFO("rank " << rank);
    CHECK(s.dataIsWorld);
    CHECK_FALSE(s.grid.gridded());
    CHECK(s.grid.model == nullptr);
    CHECK(s.grid.pipe == nullptr);
    CHECK(s.grid.prevStage == nullptr);
    CHECK(s.grid.nextStage == nullptr);
    CHECK(s.grid.dataRank == rank);
    CHECK(s.grid.dataSize == 3);
    CHECK(s.dataSum == 7.0f);  // 1 + 2 + 4: every rank
  }
}

TEST_CASE("training grid: pipe 2 x model 2 x data 2 has DeepSpeed's coordinates and groups",
          "[grid]") {
  const auto seen = runGrid(8, 2, 2);
  for (const auto& [rank, s] : seen) {
    INFO("rank " << rank);
    // rank = (pipe x 2 + data) x 2 + model
    CHECK(s.grid.pipeRank == rank / 4);
    CHECK(s.grid.dataRank == (rank / 2) % 2);
    CHECK(s.grid.modelRank == rank % 2);
    CHECK(s.grid.pipeSize == 2);
    CHECK(s.grid.dataSize == 2);
    CHECK(s.grid.modelSize == 2);
    CHECK_FALSE(s.dataIsWorld);
    CHECK(s.grid.model != nullptr);
    CHECK(s.grid.pipe != nullptr);
    CHECK((s.grid.prevStage != nullptr) == (rank >= 4));
    CHECK((s.grid.nextStage != nullptr) == (rank < 4));
    // The data peers of rank r differ from it in the data coordinate only: r and r ^ 2.
    CHECK(s.dataSum == static_cast<float>((1 << rank) + (1 << (rank ^ 2))));
  }
  CHECK(seen.at(5).grid.coordinates() == "(pipe 1, data 0, model 1)");
}
