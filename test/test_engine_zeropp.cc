// ZeRO++ through the engine at stage 3 (bf16) on 4 ranks as 2 nodes x 2 (threads, Gloo over
// loopback, each group behind its own comms logger): hpZ alone gives plain ZeRO 3's bits with
// the backward's gathers inside the node; qwZ all-gathers int8 blocks (about a quarter of the
// bf16... half of the 16-bit gather's bytes); qgZ moves the gradients' reduce-scatter to int4
// hops within and across nodes (only the 1-D tensors still reduce-scattered over the data
// group); each trains within 2% of plain ZeRO 3's loss, all three together too. The quantisers
// and collectives themselves: test_quantized_collectives.cc.
#include <catch2/catch.hpp>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
#include "runtime/comm/comms_logger.h"
#include "runtime/comm/memory_store.h"
#include "runtime/config/ds_config.h"
#include "runtime/engine/engine.h"
#include "test/gpt_parallel_harness.h"
#include "test/rank_threads.h"

using namespace ds;
using namespace ds::runtime;

namespace {

constexpr int kWorld = 4, kPlaces = 2, kMicro = 2, kSteps = 12;

std::string config(const std::string& zeropp) {
  return R"({"train_batch_size": )" + std::to_string(kMicro * kWorld) +
         R"(, "train_micro_batch_size_per_gpu": )" + std::to_string(kMicro) +
         R"(, "optimizer": {"type": "AdamW", "params": {"lr": 0.003}}, "bf16": {"enabled": true},
         "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0,
         "stage3_max_reuse_distance": 0)" +
         zeropp + "}}";
}

struct Bytes {
  uint64_t data = 0, node = 0, crossNode = 0;  // rank 0's, in its groups, all steps
};

struct Run {
  std::vector<float> losses;       // rank 0's
  uint64_t buffersBeforeStep = 0;  // rank 0's engine buffers between the last backward and step
  std::vector<uint64_t> hashes;
  Bytes gathers, reductions;
};

Run train(const std::string& zeropp, bool nodeGroups = true) {
  MemoryStore store;
  Run run;
  run.hashes.resize(kWorld);
  const GptConfig model = test::tinyGpt();
  CommsLoggerConfig logging;
  logging.enabled = true;
  test::onThreads(kWorld, [&](int r) {
    GroupFactory factory(store, {r, {kWorld}}, test::loopbackGroupOptions("zeropp-engine"));
    std::unique_ptr<Communicator> world = factory.world();
    const test::NodeGroups made = test::makeNodeGroups(factory, r, kWorld, kPlaces);
    CommsLogger dataLog(logging), nodeLog(logging), crossLog(logging);
    LoggingCommunicator data(*world, dataLog), nodeComm(*made.node, nodeLog),
        crossComm(*made.crossNode, crossLog);
    ParallelGroups groups;
    if (nodeGroups) {
      groups.zeroNode = &nodeComm;
      groups.zeroCrossNode = &crossComm;
    }
    Gpt gpt(model);
    Engine engine(gpt, parseDeepSpeedConfig(config(zeropp), kWorld, "zeropp-test"), data, 3,
                  groups);
    // Each rank its own samples, the same every step: the loss falls fast.
    const Batch batch = test::tokenBatch(static_cast<uint64_t>(r * kMicro), kMicro, model.seqLength,
                                         model.vocabSize);
    for (int s = 0; s < kSteps; ++s) {
      const float loss = engine.forwardBackward(batch);
      if (r == 0) run.buffersBeforeStep = engine.memory().buffers;
      engine.step();
      if (r == 0) run.losses.push_back(loss);
    }
    run.hashes[r] = engine.parameterHash();
    if (r == 0) {
      run.gathers = {dataLog.bytes(CollectiveOp::AllGather), nodeLog.bytes(CollectiveOp::AllGather),
                     crossLog.bytes(CollectiveOp::AllGather)};
      run.reductions = {dataLog.bytes(CollectiveOp::ReduceScatter),
                        nodeLog.bytes(CollectiveOp::AllToAll),
                        crossLog.bytes(CollectiveOp::AllToAll)};
    }
  });
  return run;
}

}  // namespace

TEST_CASE("ZeRO++ in the engine: hpZ, qwZ and qgZ against plain ZeRO 3 on 2 nodes x 2 ranks",
          "[engine][zeropp]") {
  const Run plain = train("");
  REQUIRE(plain.losses.size() == kSteps);
  INFO("plain ZeRO 3: loss " << plain.losses.front() << " -> " << plain.losses.back()
                             << ", all-gather bytes " << plain.gathers.data
                             << ", reduce-scatter bytes " << plain.reductions.data);
  CHECK(plain.losses.back() < 0.9 * plain.losses.front());
  CHECK(plain.gathers.node == 0);

  SECTION("hpZ: the same bits, the backward's gathers within the node") {
    const Run hpz = train(R"(, "zero_hpz_partition_size": 2)");
    CHECK(hpz.losses == plain.losses);
    CHECK(hpz.hashes == plain.hashes);
    // Each layer crosses the data group once a step (forward), not twice.
    INFO("hpZ all-gather bytes: data " << hpz.gathers.data << ", node " << hpz.gathers.node);
    CHECK(hpz.gathers.data < plain.gathers.data * 0.6);
    CHECK(hpz.gathers.node > 0);
    // Between the forward and the step each rank keeps half of every layer's bf16 weights.
    const double secondary = 2.0 * static_cast<double>(Gpt(test::tinyGpt()).parameterCount()) / 2;
    const double extra =
        static_cast<double>(hpz.buffersBeforeStep) - static_cast<double>(plain.buffersBeforeStep);
    CHECK(extra >= secondary);
    CHECK(extra < 1.05 * secondary);  // the layers' padding to whole slices
  }
  SECTION("qwZ: int8 gathers, half of bf16's bytes, the loss within 2%") {
    const Run qwz = train(R"(, "zero_quantized_weights": true)");
    INFO("qwZ all-gather bytes " << qwz.gathers.data << ", loss " << qwz.losses.back());
    CHECK(qwz.gathers.data < plain.gathers.data * 0.6);
    CHECK(qwz.gathers.data > plain.gathers.data * 0.5);  // int8 plus a scale a block
    CHECK(std::fabs(qwz.losses.back() - plain.losses.back()) < 0.02 * plain.losses.back());
    CHECK(qwz.hashes[0] == qwz.hashes[1]);
  }
  SECTION("qgZ: int4 hops within and across nodes, the loss within 2%") {
    const Run qgz = train(R"(, "zero_quantized_gradients": true)");
    INFO("qgZ bytes: reduce-scatter "
         << qgz.reductions.data << " (1-D tensors), node hop " << qgz.reductions.node
         << ", cross-node hop " << qgz.reductions.crossNode << ", loss " << qgz.losses.back());
    CHECK(qgz.reductions.data > 0);
    CHECK(qgz.reductions.data < plain.reductions.data / 10);
    CHECK(qgz.reductions.crossNode > 0);
    CHECK(qgz.reductions.crossNode < plain.reductions.data / 4);
    CHECK(std::fabs(qgz.losses.back() - plain.losses.back()) < 0.02 * plain.losses.back());
  }
  SECTION("all three: the loss within 2%") {
    const Run all = train(
        R"(, "zero_hpz_partition_size": 2, "zero_quantized_weights": true,
           "zero_quantized_gradients": true)");
    INFO("ZeRO++ loss " << all.losses.back());
    CHECK(std::fabs(all.losses.back() - plain.losses.back()) < 0.02 * plain.losses.back());
    CHECK(all.gathers.data < plain.gathers.data * 0.35);
  }
  SECTION("qgZ on one node: DeepSpeed's fallback, the plain reduce-scatter") {
    const Run single = train(R"(, "zero_quantized_gradients": true)", false);
    CHECK(single.losses == plain.losses);
  }
}

TEST_CASE("ZeRO++: its keys checked and the layouts it does not take refused by name",
          "[engine][zeropp]") {
  auto parse = [](const std::string& zero) {
    return parseDeepSpeedConfig(R"({"train_batch_size": 8, "zero_optimization": )" + zero + "}",
                                kWorld, "x.json");
  };
  CHECK_THROWS_WITH(parse(R"({"stage": 2, "zero_quantized_weights": true})"),
                    Catch::Contains("zero_optimization.zero_quantized_weights: ZeRO++ partitions "
                                    "parameters: it needs zero_optimization.stage 3"));
  CHECK_THROWS_WITH(parse(R"({"stage": 3, "zero_hpz_partition_size": 3})"),
                    Catch::Contains("3 does not divide the 4 data-parallel ranks"));
  CHECK_THROWS_WITH(parse(R"({"stage": 3, "zero_quantized_gradients": true,
                              "reduce_scatter": false})"),
                    Catch::Contains("needs reduce_scatter true"));
  CHECK_THROWS_WITH(parse(R"({"stage": 3, "zero_quantized_weights": 1})"),
                    Catch::Contains("zero_quantized_weights"));
  CHECK_THROWS_WITH(parse(R"({"stage": 3, "zero_quantized_nontrainable_weights": true})"),
                    Catch::Contains("not implemented"));
  const DeepSpeedConfig ok = parse(
      R"({"stage": 3, "zero_hpz_partition_size": 2, "zero_quantized_weights": true,
          "zero_quantized_gradients": true})");
  CHECK((ok.zero.hpzPartitionSize == 2 && ok.zero.quantizedWeights && ok.zero.quantizedGradients));
  // hpZ needs its node group from the worker (refused before any collective).
  auto group = test::shmGroup(2);
  Gpt gpt(test::tinyGpt());
  CHECK_THROWS_WITH(
      Engine(gpt,
             parseDeepSpeedConfig(
                 R"({"train_batch_size": 2, "zero_optimization": {"stage": 3,
                     "zero_hpz_partition_size": 2}})",
                 2, "x.json"),
             group[0], 1),
      Catch::Contains("zero_hpz_partition_size 2: this rank was given no node group"));
}
