// Hierarchical collectives with ranks as threads: nodes of shared-memory groups whose leaders
// talk Gloo over loopback. Every op against the expected values, for 2x2, 3x2 and 2x3 layouts.
#include <catch2/catch.hpp>
#include <thread>

#include "runtime/comm/hierarchical_communicator.h"
#include "runtime/comm/memory_store.h"

using namespace ds::runtime;

TEST_CASE("hierarchical: every collective across nodes of shared-memory groups") {
  for (auto [nodes, perNode] : {std::pair{2, 2}, std::pair{3, 2}, std::pair{2, 3}}) {
    const int world = nodes * perNode;
    for (size_t count : {size_t{1}, size_t{13}, size_t{5000}}) {
      INFO(nodes << " nodes x " << perNode << ", count " << count);
      MemoryStore store;
      std::vector<std::vector<float>> reduced(world), gathered(world), scattered(world),
          broadcasted(world), maxima(world), means(world);
      std::vector<std::thread> threads;
      std::vector<std::exception_ptr> errors(world);
      for (int r = 0; r < world; ++r)
        threads.emplace_back([&, r] {
          try {
            NodeLayout layout{r, world, r % perNode, perNode, r / perNode, nodes, true};
            ShmOptions shm;
            shm.chunkBytes = 4096;
            HierarchicalCommunicator comm(store, "h", layout,
                                          {"127.0.0.1", "", std::chrono::seconds(20)}, shm);
            std::vector<float> data(count);
            for (size_t i = 0; i < count; ++i) data[i] = static_cast<float>((r + 1) * (i % 11));
            comm.allReduceSum(data.data(), count);
            reduced[r] = data;
            std::vector<float> peak(count, static_cast<float>(r)),
                mean(count, static_cast<float>(r));
            comm.allReduce(peak.data(), count, ReduceOp::Max);
            comm.allReduce(mean.data(), count, ReduceOp::Avg);
            maxima[r] = peak;
            means[r] = mean;
            std::vector<float> mine(count, static_cast<float>(r)), all(count * world);
            comm.allGather(mine.data(), all.data(), count);
            gathered[r] = all;
            std::vector<float> blocks(count * world), block(count);
            for (int b = 0; b < world; ++b)
              for (size_t i = 0; i < count; ++i) blocks[b * count + i] = b * 10.0f + r;
            comm.reduceScatterSum(blocks.data(), block.data(), count);
            scattered[r] = block;
            std::vector<float> shared(count, r == world - 2 ? 7.0f : -1.0f);
            comm.broadcast(shared.data(), count, world - 2);  // a root that is not a leader
            broadcasted[r] = shared;
            comm.barrier();
          } catch (...) {
            errors[r] = std::current_exception();
          }
        });
      for (auto& thread : threads) thread.join();
      for (auto& error : errors)
        if (error) std::rethrow_exception(error);
      const float rankSum = world * (world + 1) / 2.0f;
      for (int r = 0; r < world; ++r)
        for (size_t i = 0; i < count; ++i) {
          REQUIRE(reduced[r][i] == rankSum * (i % 11));
          REQUIRE(scattered[r][i] == world * r * 10.0f + world * (world - 1) / 2.0f);
          REQUIRE(broadcasted[r][i] == 7.0f);
          REQUIRE(maxima[r][i] == static_cast<float>(world - 1));
          REQUIRE(means[r][i] == Approx((world - 1) / 2.0));
          for (int from = 0; from < world; ++from)
            REQUIRE(gathered[r][from * count + i] == static_cast<float>(from));
        }
    }
  }
}
