// The comms logger: counts, sizes and latencies for a known sequence of ops, records kept apart
// per group with each group's own bus bandwidth factor, prof_ops filtering, verbose lines, the
// config block, and the merged table ds-launch prints.
#include <catch2/catch.hpp>
#include <cstdio>
#include <regex>
#include <thread>

#include "common/error.h"
#include "launcher/comms_summary.h"
#include "runtime/comm/comms_logger.h"
#include "runtime/comm/memory_store.h"
#include "runtime/comm/shm_communicator.h"
#include "runtime/config/ds_config.h"
#include "runtime/parallel/topology_groups.h"
#include "test/rank_threads.h"

using namespace ds;
using namespace ds::runtime;

TEST_CASE("comms logger: an all-to-all is one all_to_all record of every rank's chunks") {
  CommsLoggerConfig config;
  config.enabled = true;
  std::vector<std::vector<CommStat>> summaries(3);
  MemoryStore store;
  ds::test::onThreads(3, [&](int r) {
    ShmCommunicator shm = ShmCommunicator::join(store, "a2a", r, 3);
    shm.setGroupName("expert");
    CommsLogger logger(config);
    LoggingCommunicator comm(shm, logger);
    std::vector<float> in(3 * 100), out(3 * 100);
    for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(r * 1000 + i);
    comm.allToAll(in.data(), out.data(), 100);
    comm.allToAll(in.data(), out.data(), 100);
    for (int from = 0; from < 3; ++from)  // block `from` of out is rank from's block r
      CHECK(out[static_cast<size_t>(from) * 100] == static_cast<float>(from * 1000 + r * 100));
    summaries[r] = logger.summary();
  });
  for (const auto& s : summaries) {
    REQUIRE(s.size() == 1);  // no send / recv records: the pairs run on the inner group
    CHECK(s[0].op == ds::CollectiveOp::AllToAll);
    CHECK(s[0].bytes == 3 * 100 * 4);
    CHECK(s[0].count == 2);
  }
  CHECK(std::string(ds::collectiveOpName(ds::CollectiveOp::AllToAll)) == "all_to_all");
}

TEST_CASE("comms logger: a known sequence of ops gives the right counts and bytes") {
  CommsLoggerConfig config;
  config.enabled = true;
  std::vector<std::vector<CommStat>> summaries(2);
  MemoryStore store;
  ds::test::onThreads(2, [&](int r) {
    ShmCommunicator shm = ShmCommunicator::join(store, "log", r, 2);
    shm.setGroupName("pair");
    CommsLogger logger(config);
    LoggingCommunicator comm(shm, logger);
    std::vector<float> a(1000), b(10), out(2000);
    for (int i = 0; i < 3; ++i) comm.allReduce(a.data(), a.size());
    comm.allReduce(b.data(), b.size());
    comm.allGather(a.data(), out.data(), 1000);
    comm.broadcast(b.data(), b.size(), 0);
    comm.barrier();
    std::vector<uint16_t> halves(1000), halfBlock(500);  // bf16: 2 bytes an element
    comm.allReduce(halves.data(), halves.size(), ds::DType::BF16);
    comm.reduceScatter(halves.data(), halfBlock.data(), 500, ds::DType::BF16);
    if (r == 0) comm.send(a.data(), 250, 1);
    if (r == 1) comm.recv(a.data(), 250, 0);
    summaries[r] = logger.summary();
  });
  const auto& s = summaries[0];
  REQUIRE(s.size() == 8);  // sorted by op, then size
  REQUIRE((s[0].op == ds::CollectiveOp::AllGather && s[0].bytes == 8000 && s[0].count == 1));
  REQUIRE((s[1].op == ds::CollectiveOp::AllReduce && s[1].bytes == 40 && s[1].count == 1));
  REQUIRE((s[2].op == ds::CollectiveOp::AllReduce && s[2].bytes == 2000 && s[2].count == 1));
  REQUIRE((s[3].op == ds::CollectiveOp::AllReduce && s[3].bytes == 4000 && s[3].count == 3));
  REQUIRE((s[4].op == ds::CollectiveOp::Barrier && s[4].bytes == 0 && s[4].count == 1));
  REQUIRE((s[5].op == ds::CollectiveOp::Broadcast && s[5].bytes == 40 && s[5].count == 1));
  REQUIRE((s[6].op == ds::CollectiveOp::ReduceScatter && s[6].bytes == 2000 && s[6].count == 1));
  REQUIRE((s[7].op == ds::CollectiveOp::Send && s[7].bytes == 1000 && s[7].count == 1));
  REQUIRE(s[3].minSeconds <= s[3].totalSeconds / 3);
  REQUIRE(s[3].maxSeconds >= s[3].totalSeconds / 3);
  REQUIRE((summaries[1][6].op == ds::CollectiveOp::Recv &&
           summaries[1][6].bytes == 1000));  // "recv" < "reduce_scatter"
  for (const auto& summary : summaries)
    for (const CommStat& stat : summary) {
      INFO(ds::collectiveOpName(stat.op) << " " << stat.bytes);
      REQUIRE((stat.group == "pair" && stat.groupSize == 2));
    }
}

TEST_CASE("comms logger: ops on groups of different sizes are kept apart, each with its own n",
          "[groups]") {
  // pipe 1 x model 2 x data 3 on six ranks: model groups of 2 ({0,1}, {2,3}, {4,5}), data groups
  // of 3 ({0,2,4}, {1,3,5}), and the world of 6, all logged by one logger per rank. On nodes of
  // three the world is hierarchical: its intra- and inter-node steps are not logged apart, only
  // the all_reduce its caller issued.
  const std::vector<int> nodeSizes = GENERATE(std::vector<int>{6}, std::vector<int>{3, 3});
  const PipeModelDataTopology topology(/*pipe=*/1, /*model=*/2, /*data=*/3);
  CommsLoggerConfig config;
  config.enabled = true;
  MemoryStore store;
  std::vector<std::vector<CommStat>> summaries(6);
  ds::test::onThreads(6, [&](int r) {
    GroupOptions options;
    options.bindAddress = "127.0.0.1";
    options.storePrefix = "logged-groups";
    options.timeout = std::chrono::seconds(20);
    GroupFactory factory(store, {r, nodeSizes}, options);
    std::unique_ptr<Communicator> world = factory.world();
    TopologyGroups groups = buildTopologyGroups(factory, topology);
    CommsLogger logger(config);
    LoggingCommunicator loggedWorld(*world, logger), loggedData(*groups.data, logger),
        loggedModel(*groups.model, logger);
    std::vector<float> grads(1000, 1.0f);
    loggedModel.allReduce(grads.data(), grads.size());  // each ends at 2
    loggedData.allReduce(grads.data(), grads.size());   // 6
    loggedData.allReduce(grads.data(), grads.size());   // 18
    loggedWorld.allReduce(grads.data(), grads.size());  // 108
    ds::test::rankCheck(grads[999] == 108.0f, "each all_reduce summed its own group");
    summaries[r] = logger.summary();
  });
  // Rank 3: model (ranks 2,3), data (ranks 1,3,5); sorted by op, then group name.
  const auto& s = summaries[3];
  REQUIRE(s.size() == 3);
  REQUIRE((s[0].group == "data (ranks 1,3,5)" && s[0].groupSize == 3 && s[0].count == 2));
  REQUIRE((s[1].group == "model (ranks 2,3)" && s[1].groupSize == 2 && s[1].count == 1));
  REQUIRE((s[2].group == "world" && s[2].groupSize == 6 && s[2].count == 1));
  for (const CommStat& stat : s) REQUIRE((stat.op == ds::CollectiveOp::AllReduce && stat.bytes == 4000));
  REQUIRE(busBandwidthFactor(s[0].op, s[0].groupSize) == Approx(4.0 / 3));
  REQUIRE(busBandwidthFactor(s[1].op, s[1].groupSize) == Approx(1.0));
  REQUIRE(busBandwidthFactor(s[2].op, s[2].groupSize) == Approx(10.0 / 6));

  // The merged table: one row per group, each merged over that group's members only.
  const std::string table = ds::launcher::formatCommsSummary(summaries);
  INFO(table);
  for (const char* group : {"data (ranks 0,2,4)", "data (ranks 1,3,5)", "model (ranks 0,1)",
                            "model (ranks 2,3)", "model (ranks 4,5)", "world"})
    REQUIRE_THAT(table, Catch::Contains(std::string("all_reduce   ") + group));
  REQUIRE(std::regex_search(table, std::regex(R"(data \(ranks 1,3,5\) +3\.9 KiB +2 )")));
  REQUIRE(std::regex_search(table, std::regex(R"(world +3\.9 KiB +1 )")));
}

TEST_CASE("comms logger: prof_ops filters, disabled logs nothing, verbose prints each op") {
  CommsLoggerConfig config;
  config.enabled = true;
  config.profAll = false;
  config.profOps = {"all_gather"};
  CommsLogger filtered(config);
  filtered.record(ds::CollectiveOp::AllReduce, "world", 4, 100, 0.001);
  filtered.record(ds::CollectiveOp::AllGather, "world", 4, 100, 0.001);
  REQUIRE(filtered.summary().size() == 1);
  REQUIRE(filtered.summary()[0].op == ds::CollectiveOp::AllGather);

  CommsLogger off(CommsLoggerConfig{});
  off.record(ds::CollectiveOp::AllReduce, "world", 4, 100, 0.001);
  REQUIRE(off.summary().empty());

  config.profAll = true;
  config.verbose = true;
  std::FILE* out = std::tmpfile();
  CommsLogger verbose(config, out);
  verbose.record(ds::CollectiveOp::AllReduce, "world", 4, 1000000, 0.001);
  verbose.record(ds::CollectiveOp::AllReduce, "data (ranks 0,2)", 2, 1000000, 0.001);
  std::rewind(out);
  char line[256] = {}, second[256] = {};
  REQUIRE(std::fgets(line, sizeof(line), out) != nullptr);
  REQUIRE(std::fgets(second, sizeof(second), out) != nullptr);
  std::fclose(out);
  // 1 MB in 1 ms: algbw 1 GB/s, busbw x 2(n-1)/n = 1.5 GB/s on the 4-rank world, 1.0 GB/s on a
  // 2-rank group of it.
  REQUIRE_THAT(std::string(line),
               Catch::Contains("comm op: all_reduce | group: world | time (ms): 1.000 | msg "
                               "size: 1000000 B | algbw (GB/s): 1.000 | busbw (GB/s): 1.500"));
  REQUIRE_THAT(
      std::string(second),
      Catch::Contains("comm op: all_reduce | group: data (ranks 0,2) | time (ms): 1.000 "
                      "| msg size: 1000000 B | algbw (GB/s): 1.000 | busbw (GB/s): 1.000"));
  REQUIRE(verbose.summary().size() == 2);  // one record per group
}

TEST_CASE("comms_logger config: defaults, types and unknown keys") {
  auto config = parseDeepSpeedConfig(
      R"({"train_batch_size": 4, "comms_logger": {"enabled": true, "prof_all": false,
          "prof_ops": ["all_reduce"], "verbos": true}})",
      1, "c.json");
  REQUIRE(config.commsLogger.enabled);
  REQUIRE_FALSE(config.commsLogger.profAll);
  REQUIRE(config.commsLogger.profOps == std::vector<std::string>{"all_reduce"});
  REQUIRE_THAT(config.warnings.at(0), Catch::Contains("did you mean \"comms_logger.verbose\""));
  REQUIRE_THROWS_WITH(parseDeepSpeedConfig(R"({"train_batch_size": 4,
                          "comms_logger": {"enabled": 1}})",
                                           1, "c.json"),
                      Catch::Contains("comms_logger.enabled: expected true or false"));
  REQUIRE_THROWS_WITH(parseDeepSpeedConfig(R"({"train_batch_size": 4,
                          "comms_logger": {"prof_ops": "all_reduce"}})",
                                           1, "c.json"),
                      Catch::Contains("comms_logger.prof_ops: expected a list"));
}

TEST_CASE("merged table: min / median / max across ranks and the slowest rank") {
  std::vector<std::vector<CommStat>> perRank = {
      {{ds::CollectiveOp::AllReduce, 4096, 10, 0.010, 0, 0, "world", 4}},  // 1 ms mean
      {{ds::CollectiveOp::AllReduce, 4096, 10, 0.030, 0, 0, "world", 4}},  // 3 ms mean: the straggler
      {{ds::CollectiveOp::AllReduce, 4096, 10, 0.020, 0, 0, "world", 4}},
      {}};
  const std::string table = ds::launcher::formatCommsSummary(perRank);
  REQUIRE_THAT(table, Catch::Contains("all_reduce   world") && Catch::Contains("4.0 KiB"));
  REQUIRE_THAT(table, Catch::Contains("1.000") && Catch::Contains("2.000") &&
                          Catch::Contains("3.000") && Catch::Contains("rank 1"));
  perRank[2][0].count = 9;
  REQUIRE_THAT(ds::launcher::formatCommsSummary(perRank), Catch::Contains("9-10"));
  REQUIRE(ds::launcher::formatCommsSummary({{}, {}}).empty());
}

TEST_CASE("merged table: each group's row has its own bus bandwidth factor") {
  // 1 MB in 1 ms on every rank (algbw 1 GB/s): 1.5 GB/s busbw on the 4-rank world, 1.0 on the
  // 2-rank groups; the group column is as wide as the longest name.
  const auto stat = [](const std::string& group, int size) {
    return CommStat{ds::CollectiveOp::AllReduce, 1000000, 1, 0.001, 0.001, 0.001, group, size};
  };
  const std::string table =
      ds::launcher::formatCommsSummary({{stat("world", 4), stat("data (ranks 0,2)", 2)},
                                        {stat("world", 4), stat("data (ranks 1,3)", 2)},
                                        {stat("world", 4), stat("data (ranks 0,2)", 2)},
                                        {stat("world", 4), stat("data (ranks 1,3)", 2)}});
  INFO(table);
  REQUIRE_THAT(table, Catch::Contains("op           group            "));
  REQUIRE(std::regex_search(table, std::regex(R"(all_reduce   data \(ranks 0,2\) .* 1\.000\n)")));
  REQUIRE(std::regex_search(table, std::regex(R"(all_reduce   data \(ranks 1,3\) .* 1\.000\n)")));
  REQUIRE(std::regex_search(table, std::regex(R"(all_reduce   world            .* 1\.500\n)")));
}
