// Gloo collectives and the Engine with ranks as threads over an in-memory store (real TCP on
// loopback between the threads): collective results, and that ZeRO stage 1 trains to the same
// parameters as stage 0 with every replica bitwise identical.
#include <catch2/catch.hpp>
#include <thread>

#include "runtime/comm/gloo_communicator.h"
#include "runtime/comm/memory_store.h"
#include "runtime/config/ds_config.h"
#include "runtime/engine/engine.h"
#include "runtime/model/mlp.h"

using namespace ds::runtime;

namespace {

// Runs body(comm) on `world` threads, each with its own GlooCommunicator.
template <typename Body>
void runRanks(int world, const std::string& prefix, Body body) {
  MemoryStore store;
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      GlooCommunicator comm(store, r, world, {"127.0.0.1", prefix, std::chrono::seconds(20)});
      body(comm);
    });
  for (auto& t : threads) t.join();
}

}  // namespace

TEST_CASE("gloo: all-reduce, all-gather, reduce-scatter and broadcast give the right values") {
  for (int world : {1, 2, 3, 4}) {
    for (size_t count : {size_t{1}, size_t{7}, size_t{1000}}) {
      std::vector<std::vector<float>> reduced(world), gathered(world), broadcasted(world),
          scattered(world), maxima(world), means(world);
      runRanks(world, "t" + std::to_string(world) + "-" + std::to_string(count),
               [&](Communicator& comm) {
                 const int r = comm.rank();
                 std::vector<float> data(count);
                 for (size_t i = 0; i < count; ++i) data[i] = static_cast<float>(r + 1) * (i + 1);
                 comm.allReduceSum(data.data(), count);
                 reduced[r] = data;
                 std::vector<float> peak(count, static_cast<float>(r)), mean(count, 2.0f * r);
                 comm.allReduce(peak.data(), count, ReduceOp::Max);
                 comm.allReduce(mean.data(), count, ReduceOp::Avg);
                 maxima[r] = peak;
                 means[r] = mean;
                 std::vector<float> shard(count, static_cast<float>(r)), all(count * world);
                 comm.allGather(shard.data(), all.data(), count);
                 gathered[r] = all;
                 std::vector<float> blocks(count * world), mine(count);
                 for (int blk = 0; blk < world; ++blk)
                   for (size_t i = 0; i < count; ++i)
                     blocks[blk * count + i] = blk * 100.0f + r + i;
                 comm.reduceScatterSum(blocks.data(), mine.data(), count);
                 scattered[r] = mine;
                 std::vector<float> b(count, r == world - 1 ? 42.0f : -1.0f);
                 comm.broadcast(b.data(), count, world - 1);
                 broadcasted[r] = b;
               });
      const float rankSum = world * (world + 1) / 2.0f;
      for (int r = 0; r < world; ++r) {
        INFO("world " << world << " count " << count << " rank " << r);
        for (size_t i = 0; i < count; ++i) REQUIRE(reduced[r][i] == rankSum * (i + 1));
        for (int s = 0; s < world; ++s) REQUIRE(gathered[r][s * count] == static_cast<float>(s));
        REQUIRE(broadcasted[r] == std::vector<float>(count, 42.0f));
        REQUIRE(maxima[r] == std::vector<float>(count, static_cast<float>(world - 1)));
        REQUIRE(means[r] == std::vector<float>(count, static_cast<float>(world - 1)));
        for (size_t i = 0; i < count; ++i)
          REQUIRE(scattered[r][i] == world * (r * 100.0f + i) + world * (world - 1) / 2.0f);
      }
    }
  }
}

TEST_CASE("engine: stage 1 matches stage 0 and replicas stay bitwise identical") {
  const int world = 3;
  auto train = [&](int stage) {
    const std::string json =
        R"({"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2,
      "gradient_clipping": 0.5, "zero_optimization": {"stage": )" +
        std::to_string(stage) + R"(},
      "optimizer": {"type": "AdamW", "params": {"lr": 0.01, "weight_decay": 0.1}}})";
    const DeepSpeedConfig config = parseDeepSpeedConfig(json, world, "test");
    std::vector<std::vector<float>> params(world);
    std::vector<std::vector<double>> losses(world);
    runRanks(world, "engine" + std::to_string(stage), [&](Communicator& comm) {
      Mlp model({16, 8, 4});
      TeacherTask task(16, 4, 7);
      Engine engine(model, config, comm, 99);
      for (int step = 0; step < 12; ++step) {
        double loss = 0.0;
        for (int micro = 0; micro < 2; ++micro) {
          loss += engine.forwardBackward(task.batch(step * 24 + micro * 12 + comm.rank() * 4, 4));
          REQUIRE(engine.step() == (micro == 1));
        }
        losses[comm.rank()].push_back(loss / 2);
      }
      REQUIRE(engine.globalSteps() == 12);
      params[comm.rank()].assign(engine.parameters(),
                                 engine.parameters() + engine.parameterCount());
    });
    for (int r = 1; r < world; ++r) REQUIRE(params[r] == params[0]);
    return params[0];
  };
  const auto stage0 = train(0);
  const auto stage1 = train(1);
  REQUIRE(stage0.size() == stage1.size());
  // Same math, same order of operations per element: the same bits.
  REQUIRE(stage0 == stage1);
}
