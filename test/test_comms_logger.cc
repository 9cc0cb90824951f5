// The comms logger: counts, sizes and latencies for a known sequence of ops, prof_ops filtering,
// verbose lines, the config block, and the merged table ds-launch prints.
#include <catch2/catch.hpp>
#include <cstdio>
#include <thread>

#include "common/error.h"
#include "launcher/comms_summary.h"
#include "runtime/comm/comms_logger.h"
#include "runtime/config/ds_config.h"
#include "runtime/comm/memory_store.h"
#include "runtime/comm/shm_communicator.h"
#include "test/rank_threads.h"

using namespace ds;
using namespace ds::runtime;

TEST_CASE("comms logger: a known sequence of ops gives the right counts and bytes") {
  CommsLoggerConfig config;
  config.enabled = true;
  std::vector<std::vector<CommStat>> summaries(2);
  MemoryStore store;
  ds::test::onThreads(2, [&](int r) {
    ShmCommunicator shm = ShmCommunicator::join(store, "log", r, 2);
    CommsLogger logger(config, 2);
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
  REQUIRE((s[0].op == "all_gather" && s[0].bytes == 8000 && s[0].count == 1));
  REQUIRE((s[1].op == "all_reduce" && s[1].bytes == 40 && s[1].count == 1));
  REQUIRE((s[2].op == "all_reduce" && s[2].bytes == 2000 && s[2].count == 1));
  REQUIRE((s[3].op == "all_reduce" && s[3].bytes == 4000 && s[3].count == 3));
  REQUIRE((s[4].op == "barrier" && s[4].bytes == 0 && s[4].count == 1));
  REQUIRE((s[5].op == "broadcast" && s[5].bytes == 40 && s[5].count == 1));
  REQUIRE((s[6].op == "reduce_scatter" && s[6].bytes == 2000 && s[6].count == 1));
  REQUIRE((s[7].op == "send" && s[7].bytes == 1000 && s[7].count == 1));
  REQUIRE(s[3].minSeconds <= s[3].totalSeconds / 3);
  REQUIRE(s[3].maxSeconds >= s[3].totalSeconds / 3);
  REQUIRE((summaries[1][6].op == "recv" &&
           summaries[1][6].bytes == 1000));  // "recv" < "reduce_scatter"
}

TEST_CASE("comms logger: prof_ops filters, disabled logs nothing, verbose prints each op") {
  CommsLoggerConfig config;
  config.enabled = true;
  config.profAll = false;
  config.profOps = {"all_gather"};
  CommsLogger filtered(config, 4);
  filtered.record("all_reduce", 100, 0.001);
  filtered.record("all_gather", 100, 0.001);
  REQUIRE(filtered.summary().size() == 1);
  REQUIRE(filtered.summary()[0].op == "all_gather");

  CommsLogger off(CommsLoggerConfig{}, 4);
  off.record("all_reduce", 100, 0.001);
  REQUIRE(off.summary().empty());

  config.profAll = true;
  config.verbose = true;
  std::FILE* out = std::tmpfile();
  CommsLogger verbose(config, 4, out);
  verbose.record("all_reduce", 1000000, 0.001);
  std::rewind(out);
  char line[256] = {};
  REQUIRE(std::fgets(line, sizeof(line), out) != nullptr);
  std::fclose(out);
  // 1 MB in 1 ms: algbw 1 GB/s, busbw x 2(n-1)/n = 1.5 GB/s at 4 ranks.
  REQUIRE_THAT(std::string(line), Catch::Contains("comm op: all_reduce | time (ms): 1.000 | msg "
                                                  "size: 1000000 B | algbw (GB/s): 1.000 | busbw "
                                                  "(GB/s): 1.500"));
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
      {{"all_reduce", 4096, 10, 0.010, 0, 0}},  // 1 ms mean
      {{"all_reduce", 4096, 10, 0.030, 0, 0}},  // 3 ms mean: the straggler
      {{"all_reduce", 4096, 10, 0.020, 0, 0}},
      {}};
  const std::string table = ds::launcher::formatCommsSummary(perRank);
  REQUIRE_THAT(table, Catch::Contains("all_reduce") && Catch::Contains("4.0 KiB"));
  REQUIRE_THAT(table, Catch::Contains("1.000") && Catch::Contains("2.000") &&
                          Catch::Contains("3.000") && Catch::Contains("rank 1"));
  perRank[2][0].count = 9;
  REQUIRE_THAT(ds::launcher::formatCommsSummary(perRank), Catch::Contains("9-10"));
  REQUIRE(ds::launcher::formatCommsSummary({{}, {}}).empty());
}
