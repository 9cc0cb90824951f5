// DeepSpeed's elastic batch computation: DeepSpeed's own worked example and unit-test cases
// (test_elastic.py, as data), 600 random configs against a Python transcription of the
// algorithms (test/reference/elasticity_reference.py), the config override of section 15.2, and
// ds-elastic's output and exit codes, and its refusal of a config the scheduler saw otherwise.
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

// DeepSpeed's own unit tests, tests/unit/elasticity/test_elastic.py (deepspeedai/DeepSpeed at
// c5601dbe079597b9, after PR #8237 "Keep the elastic batch size within max_train_batch_size",
// which elastic_batch.cc follows), transcribed as data: each case's change to the file's
// ds_config fixture (a JSON merge patch: null deletes a key), the world size it passes (or
// WORLD_SIZE it sets), and what it asserts. Before #8237 (e.g. 38327e07f6cd) test_proper_mbsz
// passed world size 7 and expected micro-batch 3: the batch came back as 42, over the config's
// own max of 32; #8237 changed the test to world size 4, as here. Not transcribed:
// test_old_version (target_deepspeed_version), the return_microbatch tests and
// test_model_parallel_v2_microbatch_is_per_dp_rank (return_microbatch=True, which this API does
// not take), and TestElasticConfigChanged (DEEPSPEED_ELASTICITY_CONFIG: test_config_policy.cc
// checks the comparison, the ds-elastic case below the tool's use of it).
struct DeepSpeedCase {
  const char* test;
  const char* change;
  int64_t worldSize;
  const char* envWorldSize;
  bool error;
  int64_t finalBatchSize;  // 0: not asserted by DeepSpeed's test
  size_t validGpus;        // how many; 0: not asserted
  int64_t microBatchSize;  // 0: not asserted
  int64_t finalAtMost;     // 0: not asserted
};

const DeepSpeedCase kDeepSpeedCases[] = {
    {"test_basic_10k", "{}", 0, nullptr, false, 9792, 23, 0, 0},
    {"test_disabled", R"({"enabled": false})", 0, nullptr, true, 0, 0, 0, 0},
    {"test_valid_world_size", "{}", 64, nullptr, false, 0, 0, 17, 0},
    {"test_invalid_world_size", "{}", 128, nullptr, true, 0, 0, 0, 0},
    {"test_future_elastic_version", R"({"version": "0.3"})", 0, nullptr, true, 0, 0, 0, 0},
    {"test_missing_max_batch", R"({"max_train_batch_size": null})", 0, nullptr, true, 0, 0, 0, 0},
    {"test_missing_micro_batch", R"({"micro_batch_sizes": null})", 0, nullptr, true, 0, 0, 0, 0},
    {"test_empty_config",
     R"({"max_train_batch_size": null, "micro_batch_sizes": null, "min_gpus": null,
         "max_gpus": null, "min_time": null, "version": null})",
     0, nullptr, true, 0, 0, 0, 0},
    {"test_model_parallel_v1_invalid",
     R"({"model_parallel_size": 4, "num_gpus_per_node": 8, "version": 0.1})", 0, nullptr, true, 0,
     0, 0, 0},
    {"test_model_parallel_v2_invalid",
     R"({"model_parallel_size": 16, "num_gpus_per_node": 8, "version": 0.2})", 16, nullptr, true, 0,
     0, 0, 0},
    {"test_model_parallel_v2_valid",
     R"({"model_parallel_size": 4, "num_gpus_per_node": 8, "version": 0.2})", 0, "16", false, 0, 0,
     0, 0},
    {"test_invalid_config_values[micro_batch_sizes-value0]",
     R"({"micro_batch_sizes": [1, 4, -1, 2, -10]})", 0, nullptr, true, 0, 0, 0, 0},
    {"test_invalid_config_values[min_gpus--1]", R"({"min_gpus": -1})", 0, nullptr, true, 0, 0, 0,
     0},
    {"test_invalid_config_values[max_gpus--1]", R"({"max_gpus": -1})", 0, nullptr, true, 0, 0, 0,
     0},
    {"test_invalid_config_values[micro_batch_sizes-5]", R"({"micro_batch_sizes": 5})", 0, nullptr,
     true, 0, 0, 0, 0},
    {"test_invalid_config_values[micro_batch_sizes-value4]",
     R"({"micro_batch_sizes": ["a", null, 0.5]})", 0, nullptr, true, 0, 0, 0, 0},
    {"test_invalid_config_values[micro_batch_sizes-value5]",
     R"({"micro_batch_sizes": [2, 0.5, 4]})", 0, nullptr, true, 0, 0, 0, 0},
    {"test_proper_mbsz",
     R"({"max_train_batch_size": 32, "micro_batch_sizes": [1, 2, 3, 7], "min_gpus": 1})", 4,
     nullptr, false, 0, 0, 3, 0},
    {"test_batch_size_within_max",
     R"({"max_train_batch_size": 100, "micro_batch_sizes": [8, 10, 12], "min_gpus": 1})", 0,
     nullptr, false, 0, 0, 0, 100},
};

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

TEST_CASE("elastic batch: DeepSpeed's test_elastic.py cases give its expected values",
          "[elastic]") {
  // test_elastic.py's ds_config fixture.
  const Json base = {{"enabled", true},
                     {"max_train_batch_size", 10000},
                     {"micro_batch_sizes", {8, 12, 16, 17}},
                     {"min_gpus", 32},
                     {"max_gpus", 1500},
                     {"min_time", 20},
                     {"version", 0.1}};
  for (const DeepSpeedCase& t : kDeepSpeedCases) {
    Json e = base;
    e.merge_patch(Json::parse(t.change));
    INFO(t.test << ": " << e.dump() << ", world size " << t.worldSize << ", WORLD_SIZE "
                << (t.envWorldSize ? t.envWorldSize : "unset"));
    if (t.error) {
      CHECK_THROWS_AS(computeElasticBatch(fromJson(e), t.worldSize, t.envWorldSize), ds::Error);
      continue;
    }
    ds::runtime::ElasticBatch got;
    REQUIRE_NOTHROW(got = computeElasticBatch(fromJson(e), t.worldSize, t.envWorldSize));
    if (t.finalBatchSize) CHECK(got.finalBatchSize == t.finalBatchSize);
    if (t.validGpus) CHECK(got.validGpus.size() == t.validGpus);
    if (t.microBatchSize) CHECK(got.microBatchSize == t.microBatchSize);
    if (t.finalAtMost) CHECK(got.finalBatchSize <= t.finalAtMost);
    // test_basic_10k's property, asserted for every case that computes a batch: each valid GPU
    // count divides the batch, and some micro-batch size divides each GPU's share.
    for (int64_t gpus : got.validGpus) {
      INFO(gpus << " GPUs");
      REQUIRE(got.finalBatchSize % gpus == 0);
      bool divisible = false;
      for (int64_t mb : e["micro_batch_sizes"].get<std::vector<int64_t>>())
        divisible = divisible || (got.finalBatchSize / gpus) % mb == 0;
      CHECK(divisible);
    }
  }
}

// TestNonElasticBatchParams and TestNonElasticBatchParamsWithOverride (2 ranks): a config with
// train_batch_size beside an enabled elasticity block is refused unless the block says
// ignore_non_elastic_batch_info.
TEST_CASE("elastic batch: DeepSpeed's non-elastic batch params tests", "[elastic]") {
  const std::string block =
      R"("elasticity": {"enabled": true, "max_train_batch_size": 4,
         "micro_batch_sizes": [1, 2, 3, 4], "min_gpus": 1, "max_gpus": 4, "min_time": 20,
         "version": 0.1)";
  const std::string rest = R"(, "train_batch_size": 2, "steps_per_print": 1,
      "optimizer": {"type": "Lamb", "params": {"lr": 0.00015}}, "gradient_clipping": 1.0})";
  CHECK_THROWS_AS(ds::runtime::parseDeepSpeedConfig("{" + block + "}" + rest, 2, "c.json"),
                  ds::Error);
  CHECK_NOTHROW(ds::runtime::parseDeepSpeedConfig(
      "{" + block + R"(, "ignore_non_elastic_batch_info": true})" + rest, 2, "c.json"));
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

  // The block the scheduler saw (DEEPSPEED_ELASTICITY_CONFIG): another one is what a job's ranks
  // refuse, and so does ds-elastic, with their message; the same one (with the keys DeepSpeed does
  // not compare changed) passes.
  const std::string seen =
      R"('{"max_train_batch_size": 10000, "micro_batch_sizes": [8, 12, 16, 17], "version": 0.1,)";
  r = runTool(dir, "-c " + dir + "/v1.json --json",
              "env DEEPSPEED_ELASTICITY_CONFIG=" + seen + R"( "min_gpus": 1}')");
  CHECK(r.status == 0);
  CHECK(r.out.rfind("{\"final_batch_size\": 9792", 0) == 0);
  r = runTool(dir, "-c " + dir + "/v1.json --json",
              R"(env DEEPSPEED_ELASTICITY_CONFIG='{"max_train_batch_size": 10000, )"
              R"("micro_batch_sizes": [8, 12, 16], "version": 0.1}')");
  CHECK(r.status == 2);
  CHECK(r.out.empty());
  CHECK(r.err.find(dir + "/v1.json: elasticity.micro_batch_sizes: elastic config "
                         "'micro_batches=[8, 12, 16]' seen by the resource scheduler "
                         "(DEEPSPEED_ELASTICITY_CONFIG) does not match micro_batches=[8, 12, 16, "
                         "17] in the config passed to the runtime") != std::string::npos);

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

TEST_CASE("elastic batch: a model replica of several ranks rescales in whole replicas",
          "[elastic]") {
  ds::runtime::ElasticityConfig c;
  c.enabled = true;
  c.maxTrainBatchSize = 64;
  c.microBatchSizes = {2, 4};
  c.minGpus = 1;
  c.maxGpus = 64;
  c.numGpusPerNode = 4;
  c.modelParallelSize = 2;
  // v0.2 over nodes of 4 GPUs, 2 data-parallel ranks each: the batch 48 for data-parallel sizes
  // 2, 4, 6, 8, 12, 24 (the Python transcription's numbers for worlds 4..16).
  const auto eight = ds::runtime::elasticReplicaBatch(c, 8);
  CHECK(eight.finalBatchSize == 48);
  CHECK(eight.validGpus == std::vector<int64_t>{2, 4, 6, 8, 12, 24});
  CHECK(*eight.microBatchSize == 4);  // 48 / 4 replicas = 12 per replica
  CHECK(*eight.gradientAccumulationSteps == 3);
  const auto twelve = ds::runtime::elasticReplicaBatch(c, 12);
  CHECK(*twelve.microBatchSize == 4);
  CHECK(*twelve.gradientAccumulationSteps == 2);  // 48 / (4 x 6)
  // 6 ranks: 3 replicas, not among the valid sizes: v0.2's fallback batch for them, 60.
  const auto six = ds::runtime::elasticReplicaBatch(c, 6);
  CHECK(six.finalBatchSize == 60);
  CHECK(*six.gradientAccumulationSteps == 5);
  CHECK_THROWS_WITH(ds::runtime::elasticReplicaBatch(c, 7),
                    Catch::Contains("not a whole number of model replicas of 2 ranks") &&
                        Catch::Contains("run a multiple of 2 ranks"));
  // model_parallel_size 1 is DeepSpeed's computation unchanged.
  c.modelParallelSize = 1;
  const auto plain = ds::runtime::computeElasticBatch(c, 8, nullptr);
  const auto same = ds::runtime::elasticReplicaBatch(c, 8);
  CHECK(same.finalBatchSize == plain.finalBatchSize);
  CHECK(same.microBatchSize == plain.microBatchSize);
  CHECK(same.gradientAccumulationSteps == plain.gradientAccumulationSteps);

  // Through a config whose replica is 2 ranks (the data-parallel size is given, 4 of 8 ranks).
  const std::string block =
      R"({"elasticity": {"enabled": true, "max_train_batch_size": 64, "micro_batch_sizes": [2, 4],
          "max_gpus": 64, "num_gpus_per_node": 4, "model_parallel_size": MP}})";
  auto withMp = [&](const std::string& mp) {
    std::string text = block;
    text.replace(text.find("MP"), 2, mp);
    return text;
  };
  const auto cfg = ds::runtime::parseDeepSpeedConfig(withMp("2"), 4, "c.json", 2);
  CHECK(cfg.batch.trainBatchSize == 48);
  CHECK(cfg.batch.microBatchPerGpu == 4);
  CHECK(cfg.batch.gradientAccumulationSteps == 3);
  CHECK_THROWS_WITH(ds::runtime::parseDeepSpeedConfig(withMp("1"), 4, "c.json", 2),
                    Catch::Contains("elasticity.model_parallel_size") &&
                        Catch::Contains("set it to 2"));
}
