// ds-comm-bench's argument parsing: sizes with K/M/G, ops and dtypes, and clear errors.
#include <catch2/catch.hpp>

#include "common/error.h"
#include "runtime/config/ds_config.h"
#include "worker/comm_bench_job.h"

using namespace ds::worker;

TEST_CASE("ds-comm-bench: sizes, ops and their errors") {
  REQUIRE(parseByteSize("--min", "1K") == 1024);
  REQUIRE(parseByteSize("--max", "256M") == (uint64_t{256} << 20));
  REQUIRE(parseByteSize("--max", "1G") == (uint64_t{1} << 30));
  REQUIRE(parseByteSize("--max", "4096") == 4096);
  REQUIRE_THROWS_WITH(parseByteSize("--max", "12Q"), Catch::Contains("\"12Q\" is not a size"));
  REQUIRE_THROWS_WITH(parseByteSize("--max", "M"), Catch::Contains("not a size"));

  const auto options = parseCommBenchOptions(
      {"ds-comm-bench", "--op", "all_gather", "--min", "2K", "--max", "1M", "--check", "--json"});
  REQUIRE(options.op == "all_gather");
  REQUIRE(options.minBytes == 2048);
  REQUIRE(options.maxBytes == (1 << 20));
  REQUIRE(options.check);
  REQUIRE(options.json);
  REQUIRE_THROWS_WITH(parseCommBenchOptions({"ds-comm-bench", "--op", "alltoall"}),
                      Catch::Contains("use all_reduce, all_gather, reduce_scatter or broadcast"));
  REQUIRE(parseCommBenchOptions({"ds-comm-bench", "--op", "reduce_scatter"}).op ==
          "reduce_scatter");
  REQUIRE(parseCommBenchOptions({"ds-comm-bench", "--dtype", "bf16"}).dtype == "bf16");
  REQUIRE_THROWS_WITH(
      parseCommBenchOptions({"ds-comm-bench", "--dtype", "int8"}),
      Catch::Contains("--dtype: unknown data type \"int8\" (use fp32, bf16 or fp16)"));
  REQUIRE_THROWS_WITH(parseCommBenchOptions({"ds-comm-bench", "--min", "8K", "--max", "1K"}),
                      Catch::Contains("need one element <= min <= max"));
  REQUIRE_THROWS_WITH(parseCommBenchOptions({"ds-comm-bench", "--dtype", "bf16", "--min", "1"}),
                      Catch::Contains("need one element <= min <= max"));
  REQUIRE_THROWS_WITH(parseCommBenchOptions({"ds-comm-bench", "--fast"}),
                      Catch::Contains("unknown argument \"--fast\""));
}

TEST_CASE(
    "comm_backend: config key and ds-comm-bench --backend accept auto/shm/hierarchical/gloo") {
  using ds::runtime::parseDeepSpeedConfig;
  REQUIRE(parseDeepSpeedConfig(R"({"train_batch_size": 2})", 1, "c").commBackend == "auto");
  REQUIRE(parseDeepSpeedConfig(R"({"train_batch_size": 2, "comm_backend": "gloo"})", 1, "c")
              .commBackend == "gloo");
  REQUIRE_THROWS_WITH(
      parseDeepSpeedConfig(R"({"train_batch_size": 2, "comm_backend": "nccl"})", 1, "c"),
      Catch::Contains("comm_backend: expected \"auto\", \"shm\", \"hierarchical\" or \"gloo\""));
  REQUIRE(parseCommBenchOptions({"ds-comm-bench", "--backend", "shm"}).backend == "shm");
  REQUIRE_THROWS_WITH(parseCommBenchOptions({"ds-comm-bench", "--backend", "tcp"}),
                      Catch::Contains("use auto, shm, hierarchical or gloo"));
}
