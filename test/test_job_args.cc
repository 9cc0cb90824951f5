// Job arguments, parsed once for ds-launch and ds-worker: train's options and defaults,
// ds-comm-bench's sizes, ops, dtypes and backends as enums, programs passed through, and errors
// that name the job and the argument.
#include <catch2/catch.hpp>

#include "common/error.h"
#include "contract/job_args.h"
#include "runtime/config/ds_config.h"
#include "runtime/config/job_config.h"

using namespace ds;
using ds::CommBackend;

TEST_CASE("job args: train options, defaults and errors") {
  const JobSpec spec = parseJobArgs({"train", "--config", "c.json", "--steps", "40", "--seed", "7",
                                     "--save_dir", "ckpt", "--print_param_hash"});
  CHECK(spec.kind == JobKind::Train);
  CHECK(spec.configPaths == std::vector<std::string>{"c.json"});
  CHECK(spec.train.steps == 40);
  CHECK(spec.train.seed == 7);
  CHECK(spec.train.saveDir == "ckpt");
  CHECK(spec.train.printParamHash);
  CHECK(parseJobArgs({"train", "--deepspeed_config=d.json"}).train.steps == 200);
  CHECK(parseJobArgs({"train", "--deepspeed_config=d.json"}).configPaths ==
        std::vector<std::string>{"d.json"});
  CHECK_THROWS_WITH(parseJobArgs({"train", "--steps", "3"}), Catch::Contains("train: --config"));
  CHECK_THROWS_WITH(parseJobArgs({"train", "--config", "c", "--steps", "0"}),
                    Catch::Contains("train: --steps"));
  CHECK_THROWS_WITH(parseJobArgs({"train", "--config", "c", "--steps", "12x"}),
                    Catch::Contains("train: --steps"));
  CHECK_THROWS_WITH(parseJobArgs({"train", "--config", "c", "--stepz", "3"}),
                    Catch::Contains("--stepz"));
  CHECK_THROWS_AS(parseJobArgs({"train", "--config", "c", "--save_interval", "-1"}), ds::Error);
  CHECK(parseJobArgs({"barrier"}).kind == JobKind::Barrier);
  CHECK_THROWS_WITH(parseJobArgs({"barrier", "--x"}), Catch::Contains("barrier: "));
}

TEST_CASE("job args: train takes several config files, as values or a comma list") {
  using V = std::vector<std::string>;
  const JobSpec spec = parseJobArgs({"train", "--config", "a.yml", "b.yml", "--steps", "3"});
  CHECK(spec.configPaths == V{"a.yml", "b.yml"});
  CHECK(spec.train.steps == 3);
  CHECK(parseJobArgs({"train", "--steps", "3", "--config", "a.yml", "b.yml"}).configPaths ==
        V{"a.yml", "b.yml"});
  const JobSpec listed = parseJobArgs({"train", "--config", "a.yml, b.yml"});
  CHECK(ds::runtime::splitConfigPaths(listed.configPaths) == V{"a.yml", "b.yml"});
  CHECK_THROWS_WITH(parseJobArgs({"train", "--config"}), Catch::Contains("train: --config"));
}

TEST_CASE("job args: programs pass through, their DeepSpeed config is found") {
  const JobSpec spec = parseJobArgs({"train.py", "--deepspeed_config", "ds.json", "--lr", "1"});
  CHECK(spec.kind == JobKind::Program);
  CHECK(spec.configPaths == std::vector<std::string>{"ds.json"});
  CHECK(parseJobArgs({"python3", "-c", "print(1)"}).configPaths.empty());
  // A program's positional arguments after its --config are its own, not more config files.
  CHECK(parseJobArgs({"train.py", "--config", "a.yml", "b.txt"}).configPaths ==
        std::vector<std::string>{"a.yml"});
  CHECK_THROWS_AS(parseJobArgs({}), ds::Error);
}

TEST_CASE("job args: ds-comm-bench sizes, ops, dtypes and backends") {
  CHECK(parseByteSize("--min", "1K") == 1024);
  CHECK(parseByteSize("--max", "256M") == (uint64_t{256} << 20));
  CHECK(parseByteSize("--max", "1G") == (uint64_t{1} << 30));
  CHECK(parseByteSize("--max", "4096") == 4096);
  CHECK_THROWS_WITH(parseByteSize("--max", "12Q"), Catch::Contains("\"12Q\" is not a size"));
  CHECK_THROWS_WITH(parseByteSize("--max", "M"), Catch::Contains("not a size"));
  CHECK_THROWS_WITH(parseByteSize("--max", "-1K"), Catch::Contains("not a size"));
  CHECK_THROWS_WITH(parseByteSize("--max", "99999999999999999999G"),
                    Catch::Contains("larger than 1T"));
  CHECK(parseByteSize("--max", "1T") == (uint64_t{1} << 40));
  CHECK_THROWS_WITH(parseByteSize("--max", "2T"), Catch::Contains("larger than 1T"));
  CHECK(parseByteSize("--node-memory", "2T", uint64_t{1} << 50) == (uint64_t{2} << 40));
  CHECK_THROWS_WITH(parseByteSize("--node-memory", "2000T", uint64_t{1} << 50),
                    Catch::Contains("\"2000T\" is larger than 1024T"));

  const auto options = parseJobArgs({"ds-comm-bench", "--op", "all_gather", "--min", "2K", "--max",
                                     "1M", "--check", "--json"})
                           .bench;
  CHECK(options.op == CollectiveOp::AllGather);
  CHECK(options.minBytes == 2048);
  CHECK(options.maxBytes == (1 << 20));
  CHECK(options.check);
  CHECK(options.json);
  CHECK_THROWS_WITH(parseJobArgs({"ds-comm-bench", "--op", "alltoall"}),
                    Catch::Contains("use all_reduce, all_gather, reduce_scatter or broadcast"));
  CHECK(parseJobArgs({"ds-comm-bench", "--op", "reduce_scatter"}).bench.op ==
        CollectiveOp::ReduceScatter);
  CHECK(parseJobArgs({"ds-comm-bench", "--dtype", "bf16"}).bench.dtype == DType::BF16);
  CHECK_THROWS_WITH(
      parseJobArgs({"ds-comm-bench", "--dtype", "int8"}),
      Catch::Contains("--dtype: unknown data type \"int8\" (use fp32, bf16 or fp16)"));
  CHECK_THROWS_WITH(parseJobArgs({"ds-comm-bench", "--min", "8K", "--max", "1K"}),
                    Catch::Contains("need one element <= min <= max"));
  CHECK_THROWS_WITH(parseJobArgs({"ds-comm-bench", "--dtype", "bf16", "--min", "1"}),
                    Catch::Contains("need one element <= min <= max"));
  CHECK_THROWS_WITH(parseJobArgs({"ds-comm-bench", "--fast"}), Catch::Contains("--fast"));
  CHECK_THROWS_WITH(parseJobArgs({"ds-comm-bench", "--iters", "0"}),
                    Catch::Contains("ds-comm-bench: --iters"));
  CHECK_THROWS_WITH(parseJobArgs({"ds-comm-bench", "--iters", "ten"}),
                    Catch::Contains("ds-comm-bench: --iters"));
}

TEST_CASE("comm_backend: config key and ds-comm-bench --backend parse to one enum") {
  using ds::runtime::parseDeepSpeedConfig;
  CHECK(parseDeepSpeedConfig(R"({"train_batch_size": 2})", 1, "c").commBackend ==
        CommBackend::Auto);
  CHECK(parseDeepSpeedConfig(R"({"train_batch_size": 2, "comm_backend": "gloo"})", 1, "c")
            .commBackend == CommBackend::Gloo);
  CHECK_THROWS_WITH(
      parseDeepSpeedConfig(R"({"train_batch_size": 2, "comm_backend": "nccl"})", 1, "c"),
      Catch::Contains("comm_backend: expected \"auto\", \"shm\", \"hierarchical\" or \"gloo\""));
  CHECK(parseJobArgs({"ds-comm-bench", "--backend", "shm"}).bench.backend == CommBackend::Shm);
  CHECK_THROWS_WITH(parseJobArgs({"ds-comm-bench", "--backend", "tcp"}),
                    Catch::Contains("ds-comm-bench --backend: expected \"auto\", \"shm\""));
}
