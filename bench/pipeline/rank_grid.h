// bench_pipeline's ranks as threads: one thread per rank of a (pipe, model, data = 1) grid over
// shared memory, each with its topology groups and its Gpt stage/slice; the first error of any
// rank is rethrown once all have stopped.
#pragma once

#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/comm/group_factory.h"
#include "runtime/comm/memory_store.h"
#include "runtime/engine/engine.h"
#include "runtime/model/gpt.h"
#include "runtime/model/gpt_stage_partition.h"
#include "runtime/parallel/topology_groups.h"

namespace ds::bench {

struct GridRank {
  int rank, stage;
  runtime::Gpt& model;
  runtime::Communicator& data;
  runtime::ParallelGroups groups;
};

// fn runs on every rank's thread with its Gpt (layers cut by pipe-partition-method `method`).
inline void onGrid(int pipe, int model, const runtime::GptConfig& config, const std::string& method,
                   const std::string& name, const std::function<void(GridRank&)>& fn) {
  using namespace ds::runtime;
  const PipeModelDataTopology topology(pipe, model, 1);
  const int world = pipe * model;
  const std::vector<int> bounds = gptStageBounds(config, pipe, method);
  MemoryStore store;
  std::mutex mutex;
  std::exception_ptr failure;
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      try {
        GroupOptions options;
        options.bindAddress = "127.0.0.1";
        options.storePrefix = name;
        options.timeout = std::chrono::seconds(120);
        GroupFactory factory(store, {r, {world}}, options);
        TopologyGroups g = buildTopologyGroups(factory, topology);
        const int stage = topology.stageOf(r);
        Gpt gpt(config, GptPlacement{g.model->rank(), model, model > 1 ? g.model.get() : nullptr,
                                     bounds[stage], bounds[stage + 1]});
        GridRank rank{r, stage, gpt, *g.data,
                      ParallelGroups{model > 1 ? g.model.get() : nullptr, g.pipe.get(),
                                     g.prevStage.get(), g.nextStage.get(), g.tied.get()}};
        fn(rank);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex);
        if (!failure) failure = std::current_exception();
      }
    });
  for (std::thread& t : threads) t.join();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace ds::bench
