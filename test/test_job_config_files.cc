// How a job's config files are given and told apart (runtime/config/job_config.h): several files or
// comma lists with spaces, merged in order with NeoX's duplicate-key error, and a .json file read
// by its keys: NeoX keys make a GPT job, DeepSpeed keys the MLP one, anything else is refused.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "runtime/config/job_config.h"
#include "test/scratch_dir.h"

using ds::runtime::parseJobConfig;
using ds::runtime::readJobConfigText;
using ds::runtime::splitConfigPaths;

namespace {

const char* kModel =
    "num-layers: 2\nhidden-size: 48\nnum-attention-heads: 4\nseq-length: 32\n"
    "max-position-embeddings: 64\n";
const char* kTrain = "data-path: data/x\ntokenizer-type: ByteTokenizer\ntrain-iters: 10\nbatch-size: 2\n";

// Shaped like NeoX's configs/autotuning_configs/tune.json: NeoX model and training keys in both
// spellings, with DeepSpeed blocks beside them as NeoX allows.
const char* kNeoxJson = R"({
  "pipe-parallel-size": 1,
  "num-layers": 2,
  "hidden-size": 48,
  "num_attention_heads": 4,
  "seq-length": 32,
  "max-position-embeddings": 64,
  "norm": "layernorm",
  "pos-emb": "rotary",
  "bias-gelu-fusion": false,
  "data-path": "data/x",
  "tokenizer-type": "ByteTokenizer",
  "train-iters": 10,
  "optimizer": {"type": "Adam", "params": {"lr": 0.0006, "betas": [0.9, 0.999], "eps": 1.0e-8}},
  "train_micro_batch_size_per_gpu": 2,
  "zero_optimization": {"stage": 1, "allgather_partitions": true, "overlap_comm": true},
  "gradient_clipping": 1.0
})";

struct Files {
  std::filesystem::path dir = ds::test::makeScratchDir("job-config-files");
  std::string write(const std::string& name, const std::string& text) {
    std::ofstream(dir / name) << text;
    return (dir / name).string();
  }
};

std::string errorOf(const std::vector<std::string>& given) {
  try {
    readJobConfigText(given);
  } catch (const ds::Error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("job config files: comma lists are trimmed and split, in order", "[neox]") {
  using V = std::vector<std::string>;
  CHECK(splitConfigPaths({"a.yml, b.yml"}) == V{"a.yml", "b.yml"});
  CHECK(splitConfigPaths({"a.yml ,b.yml,", " c.yml"}) == V{"a.yml", "b.yml", "c.yml"});
  CHECK(splitConfigPaths({"a.yml", "b.yml"}) == V{"a.yml", "b.yml"});
  CHECK(splitConfigPaths({" , "}).empty());
}

TEST_CASE("job config files: separate values and a comma list with spaces merge alike", "[neox]") {
  Files f;
  const std::string model = f.write("model.yml", kModel);
  const std::string train = f.write("train.yml", kTrain);
  const std::string separate = readJobConfigText({model, train});
  CHECK(readJobConfigText({model + ", " + train}) == separate);
  const auto job = parseJobConfig(separate, 1, "config");
  REQUIRE(job.gpt);
  CHECK(job.gpt->model.hiddenSize == 48);
  CHECK(job.gpt->trainIters == 10);
}

TEST_CASE("job config files: a key set in two files names both", "[neox]") {
  Files f;
  const std::string model = f.write("model.yml", kModel);
  const std::string again = f.write("again.yml", std::string(kTrain) + "hidden_size: 64\n");
  for (const auto& given :
       {std::vector<std::string>{model, again}, std::vector<std::string>{model + " , " + again}}) {
    const std::string error = errorOf(given);
    CHECK_THAT(error, Catch::Contains("again.yml: hidden_size is already set by") &&
                          Catch::Contains("model.yml"));
  }
}

TEST_CASE("job config files: a JSON file of NeoX keys is a NeoX config", "[neox]") {
  Files f;
  const std::string json = f.write("tune.json", kNeoxJson);
  const auto job = parseJobConfig(readJobConfigText({json}), 2, json);
  REQUIRE(job.gpt);
  CHECK(job.gpt->model.numLayers == 2);
  CHECK(job.gpt->model.numAttentionHeads == 4);
  CHECK(job.gpt->trainIters == 10);
  CHECK(job.deepspeed.zero.stage == 1);
  CHECK(job.deepspeed.batch.trainBatchSize == 4);  // 2 x 2 ranks
  // A JSON NeoX file merges with YAML ones, duplicate keys refused as between YAML files.
  const std::string extra = f.write("extra.yml", "seed: 5\n");
  const auto merged = parseJobConfig(readJobConfigText({json, extra}), 1, "config");
  REQUIRE(merged.gpt);
  CHECK(merged.gpt->seed == 5);
  CHECK_THAT(errorOf({json, f.write("dup.yml", "train_iters: 3\n")}),
             Catch::Contains("train_iters is already set by") && Catch::Contains("tune.json"));
}

TEST_CASE("job config files: DeepSpeed JSON stays DeepSpeed, shipped as written", "[neox]") {
  Files f;
  const std::string text = R"({"train_batch_size": 8, "zero_optimization": {"stage": 2}})";
  const std::string json = f.write("ds.json", text);
  CHECK(readJobConfigText({json}) == text);
  CHECK_FALSE(parseJobConfig(readJobConfigText({json}), 2, json).gpt);
  const std::string shipped =
      readJobConfigText({std::string(DS_SOURCE_DIR) + "/configs/ds_config.json"});
  CHECK(shipped.rfind("{\"neox\":", 0) != 0);
  // Not JSON at all: DeepSpeed's parser says why, as before.
  CHECK_THAT(errorOf({f.write("broken.json", "{\"train_batch_size\": ")}),
             !Catch::Contains("NeoX"));
}

TEST_CASE("job config files: keys that fit neither, or an unclear mix, are refused", "[neox]") {
  Files f;
  const std::string nonsense =
      f.write("nonsense.json", R"({"colour": "blue", "flavour": 3, "wheels": 4, "doors": 5})");
  CHECK_THAT(errorOf({nonsense}),
             Catch::Contains("nonsense.json: neither a NeoX nor a DeepSpeed") &&
                 Catch::Contains("\"colour\"") && Catch::Contains("and 1 more"));
  const std::string mixed = f.write(
      "mixed.json", R"({"train_batch_size": 8, "zero_optimization": {"stage": 1}, "seed": 3})");
  CHECK_THAT(errorOf({mixed}), Catch::Contains("mixed.json: unclear whether") &&
                                   Catch::Contains("\"seed\"") &&
                                   Catch::Contains("\"train_batch_size\""));
  // A DeepSpeed JSON beside NeoX files goes into them by name instead.
  const std::string ds = f.write("ds.json", R"({"train_batch_size": 8})");
  CHECK_THAT(errorOf({f.write("model.yml", kModel), ds}),
             Catch::Contains("ds.json: a DeepSpeed config, given beside NeoX config files"));
  CHECK_THAT(errorOf({ds, ds}), Catch::Contains("give one DeepSpeed JSON config"));
}
