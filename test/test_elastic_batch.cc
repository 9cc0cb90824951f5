// DeepSpeed's elastic batch computation: DeepSpeed's own worked example, 600 random configs
// against an independent Python transcription of the algorithms (test/reference/
// elasticity_reference.py), the config override of section 15.2, and ds-elastic's output and
// exit codes.
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>

#include "common/error.h"
#include "runtime/config/ds_config.h"
#include "runtime/elastic/elastic_batch.h"
#include "test/scratch_dir.h"
#include "test/skip.h"

using ds::runtime::computeElasticBatch;
using ds::runtime::ElasticityConfig;
using Json = nlohmann::json;

namespace {

ElasticityConfig fromJson(const Json& e) {
  return ds::runtime::readElasticityConfig(Json{{"elasticity", e}}.dump(), "case");
}

struct Run {
  int status;
  std::string out, err;
};

Run runTool(const std::string& dir, const std::string& args, const std::string& env = "") {
  const std::string cmd = env + " " + DS_BIN_DIR + "/ds-elastic " + args + " >" + dir + "/out 2>" +
                          dir + "/err";
  const int raw = std::system(cmd.c_str());
  auto slurp = [](const std::string& p) {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  };
  return {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, slurp(dir + "/out"), slurp(dir + "/err")};
}

}  // namespace

TEST_CASE("elastic batch: DeepSpeed's worked example", "[elastic]") {
  const ElasticityConfig c = fromJson({{"enabled", true},
                                       {"max_train_batch_size", 10000},
                                       {"micro_batch_sizes", {8, 12, 16, 17}},
                                       {"min_gpus", 32},
                                       {"max_gpus", 1500},
                                       {"version", 0.1}});
  const auto any = computeElasticBatch(c, 0, nullptr);
  CHECK(any.finalBatchSize == 9792);
  CHECK(any.validGpus.size() == 23);
  CHECK_FALSE(any.microBatchSize);
  const auto at64 = computeElasticBatch(c, 64, nullptr);
  CHECK(at64.microBatchSize == 17);
  CHECK(at64.gradientAccumulationSteps == 9);
  CHECK_THROWS_WITH(computeElasticBatch(c, 63, nullptr),
                    Catch::Contains("World size (63) is not valid with the current list of valid "
                                    "GPU counts: [32, 34, 36,"));
}

TEST_CASE("elastic batch: 600 random configs agree with the Python transcription", "[elastic]") {
  if (ds::test::skipUnless(std::system("/usr/bin/python3 -c '' 2>/dev/null") == 0,
                           "/usr/bin/python3 is missing"))
    return;
  std::mt19937_64 rng(20261124);
  auto pick = [&](int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo + 1));
  };
  std::vector<Json> cases;
  for (int i = 0; i < 600; ++i) {
    Json micro = Json::array();
    for (int64_t n = pick(1, 4); n > 0; --n) micro.push_back(pick(1, 24));
    const bool v2 = pick(0, 1) == 1;
    const int64_t minGpus = pick(1, 40);
    Json e = {{"enabled", true},
              {"max_train_batch_size", pick(24, 4000)},
              {"micro_batch_sizes", micro},
              {"min_gpus", minGpus},
              {"max_gpus", minGpus + pick(0, 600)},
              {"prefer_larger_batch", pick(0, 3) != 0},
              {"version", v2 ? 0.2 : 0.1}};
    if (v2) {
      e["num_gpus_per_node"] = std::vector<int64_t>{1, 2, 4, 8}[pick(0, 3)];
      e["model_parallel_size"] = std::vector<int64_t>{1, 1, 2}[pick(0, 2)];
    }
    Json c = {{"elasticity", e}, {"world_size", pick(0, 2) == 0 ? 0 : pick(1, 160)}};
    c["env_world_size"] = v2 && c["world_size"] == 0 ? Json(std::to_string(pick(1, 64))) : Json();
    cases.push_back(c);
  }
  const std::string dir = ds::test::makeScratchDir("elastic-reference");
  {
    std::ofstream in(dir + "/cases.jsonl");
    for (const Json& c : cases) in << c.dump() << '\n';
  }
  const std::string cmd = "/usr/bin/python3 " DS_SOURCE_DIR
                          "/test/reference/elasticity_reference.py <" +
                          dir + "/cases.jsonl >" + dir + "/results.jsonl";
  REQUIRE(std::system(cmd.c_str()) == 0);
  std::ifstream results(dir + "/results.jsonl");
  int errors = 0, fallbacks = 0;
  for (const Json& c : cases) {
    std::string line;
    REQUIRE(std::getline(results, line));
    const Json want = Json::parse(line);
    INFO(c.dump() << "\nreference: " << line);
    const ElasticityConfig config = fromJson(c["elasticity"]);
    const std::string env = c["env_world_size"].is_null() ? "" : c["env_world_size"].get<std::string>();
    try {
      const auto got = computeElasticBatch(config, c["world_size"].get<int64_t>(),
                                           env.empty() ? nullptr : env.c_str());
      REQUIRE_FALSE(want.contains("error"));
      CHECK(got.finalBatchSize == want["final"].get<int64_t>());
      const std::vector<int64_t> valid =
          want["valid"].is_null() ? std::vector<int64_t>{} : want["valid"].get<std::vector<int64_t>>();
      CHECK(got.validGpus == valid);
      if (want["micro"].is_null())
        CHECK_FALSE(got.microBatchSize);
      else
        CHECK(got.microBatchSize == want["micro"].get<int64_t>());
      fallbacks += got.validGpus.size() == 1;
    } catch (const ds::Error& e) {
      INFO("ours: " << e.what());
      CHECK(want.contains("error"));
      ++errors;
    }
  }
  // The cases must exercise both outcomes, not only one.
  CHECK(errors > 20);
  CHECK(errors < 500);
  CHECK(fallbacks > 5);
}

TEST_CASE("elastic batch: an enabled block sets the batch as DeepSpeed's config does",
          "[elastic]") {
  const std::string block =
      R"("elasticity": {"enabled": true, "max_train_batch_size": 10000,
         "micro_batch_sizes": [8, 12, 16, 17], "min_gpus": 32, "max_gpus": 1500, "version": 0.1)";
  const auto c = ds::runtime::parseDeepSpeedConfig("{" + block + "}}", 64, "c.json");
  CHECK(c.batch.trainBatchSize == 9792);
  CHECK(c.batch.microBatchPerGpu == 17);
  CHECK(c.batch.gradientAccumulationSteps == 9);
  CHECK_THROWS_WITH(
      ds::runtime::parseDeepSpeedConfig("{" + block + "}, \"train_batch_size\": 64}", 64, "c.json"),
      Catch::Contains("ignore_non_elastic_batch_info"));
  const auto ignored = ds::runtime::parseDeepSpeedConfig(
      "{" + block + ", \"ignore_non_elastic_batch_info\": true}, \"train_batch_size\": 64}", 64,
      "c.json");
  CHECK(ignored.batch.trainBatchSize == 9792);
  CHECK_THROWS_WITH(ds::runtime::parseDeepSpeedConfig("{" + block + "}}", 63, "c.json"),
                    Catch::Contains("World size (63) is not valid"));
}

TEST_CASE("ds-elastic: text, --json, $WORLD_SIZE for v0.2, and exit 2 with nothing on stdout",
          "[elastic]") {
  const std::string dir = ds::test::makeScratchDir("ds-elastic");
  std::ofstream(dir + "/v1.json") << R"({"elasticity": {"enabled": true, "max_train_batch_size": 10000,
      "micro_batch_sizes": [8, 12, 16, 17], "min_gpus": 32, "max_gpus": 1500, "version": 0.1}})";
  std::ofstream(dir + "/v2.json") << R"({"elasticity": {"enabled": true, "max_train_batch_size": 2000,
      "micro_batch_sizes": [2, 4, 6], "min_gpus": 1, "max_gpus": 64, "num_gpus_per_node": 4,
      "version": 0.2}})";
  std::ofstream(dir + "/off.json") << R"({"elasticity": {"enabled": false}})";
  std::ofstream(dir + "/none.json") << R"({"train_batch_size": 8})";

  Run r = runTool(dir, "-c " + dir + "/v1.json -w 64 --json");
  CHECK(r.status == 0);
  CHECK(r.out ==
        "{\"final_batch_size\": 9792, \"valid_gpus\": [32, 34, 36, 48, 51, 64, 68, 72, 96, 102, "
        "136, 144, 153, 192, 204, 272, 288, 306, 408, 576, 612, 816, 1224], "
        "\"micro_batch_size\": 17, \"gradient_accumulation_steps\": 9}\n");
  r = runTool(dir, "-c " + dir + "/v1.json");
  CHECK(r.status == 0);
  CHECK(r.out.find("final_batch_size .... 9792") != std::string::npos);
  CHECK(r.out.find("micro_batch_size ....") == std::string::npos);

  r = runTool(dir, "-c " + dir + "/v2.json --json", "WORLD_SIZE=8");
  CHECK(r.status == 0);
  CHECK(r.out.rfind("{\"final_batch_size\": ", 0) == 0);
  CHECK(r.out.find("micro_batch_size") == std::string::npos);
  r = runTool(dir, "-c " + dir + "/v2.json --json", "env -u WORLD_SIZE");
  CHECK(r.status == 2);
  CHECK(r.out.empty());
  CHECK(r.err.find("needs WORLD_SIZE") != std::string::npos);

  for (const std::string& args :
       {"-c " + dir + "/v1.json -w 63", "-c " + dir + "/off.json", "-c " + dir + "/none.json",
        "-c " + dir + "/missing.json", "-c " + dir + "/v1.json -w -4", std::string("-w 8")}) {
    INFO(args);
    r = runTool(dir, args);
    CHECK(r.status == 2);
    CHECK(r.out.empty());
    CHECK_FALSE(r.err.empty());
  }
}
