// The built ds-config binary, run as a user would: check's outputs and exit codes, schedule's JSON
// against the library's own values, and the text chart's shape.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "common/memory_budget.h"
#include "runtime/config/ds_config.h"
#include "runtime/data/indexed_dataset.h"
#include "runtime/lr/lr_schedule.h"
#include "test/scratch_dir.h"

using namespace ds::runtime;
namespace fs = std::filesystem;

namespace {

struct ToolRun {
  int status = -1;
  std::string out, err;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// One scratch directory per test process; configs and captured output live there.
const fs::path& scratch() {
  static const fs::path dir = ds::test::makeScratchDir("config-tool");
  return dir;
}

fs::path writeConfig(const std::string& name, const std::string& text) {
  const fs::path p = scratch() / name;
  std::ofstream(p) << text;
  return p;
}

// Runs `ds-config ARGS` with stdout and stderr captured separately; `env`: "NAME=VALUE " words
// before the command.
ToolRun runTool(const std::string& args, const std::string& env = "") {
  const fs::path out = scratch() / "stdout", err = scratch() / "stderr";
  const std::string command = env + std::string(DS_BIN_DIR) + "/ds-config " + args + " >" +
                              out.string() + " 2>" + err.string();
  const int raw = std::system(command.c_str());
  ToolRun r;
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

}  // namespace

TEST_CASE("ds-config check: the resolved batch trio, as a sentence and as one JSON line",
          "[ds-config]") {
  const fs::path config = writeConfig(
      "batch.json", R"({"train_batch_size": 64, "gradient_accumulation_steps": 2, "stepz": 1})");
  const ToolRun json = runTool("check " + config.string() + " --world-size 4 --json");
  INFO(json.err);
  REQUIRE(json.status == 0);
  REQUIRE(json.out.find('\n') == json.out.size() - 1);  // one line
  CHECK(nlohmann::ordered_json::parse(json.out) ==
        nlohmann::ordered_json::parse(
            R"({"world_size": 4, "train_batch_size": 64, "train_micro_batch_size_per_gpu": 8,
                "gradient_accumulation_steps": 2,
                "in_effect": ["train_batch_size", "gradient_accumulation_steps"],
                "not_in_effect": []})"));
  // Warnings go to stderr only, so the JSON stays parseable.
  CHECK(json.err.find("warning: ") != std::string::npos);
  CHECK(json.err.find("unknown key \"stepz\"") != std::string::npos);

  const ToolRun text = runTool("check " + config.string() + " --world-size 4");
  REQUIRE(text.status == 0);
  CHECK(text.out ==
        config.string() +
            ": OK (world size 4): train_batch_size 64 = micro 8 x accumulation 2 x 4 "
            "ranks\nin effect:\n"
            "  train_batch_size: batch inference (train = micro x accumulation x ranks)\n"
            "  gradient_accumulation_steps: batch inference; the engine steps at "
            "accumulation boundaries\n");

  const ToolRun single = runTool("check " + config.string() + " --json");
  REQUIRE(single.status == 0);
  const auto singleJson = nlohmann::json::parse(single.out);
  CHECK(singleJson["world_size"] == 1);
  CHECK(singleJson["train_batch_size"] == 64);
  CHECK(singleJson["train_micro_batch_size_per_gpu"] == 32);
}

TEST_CASE("ds-config check --json: control characters in the config still give valid JSON",
          "[ds-config]") {
  // U+0001 and U+001F in keys and values, at the top level and inside known blocks: the keys are
  // warned about on stderr; stdout must stay one JSON object that a strict parser reads.
  const fs::path config = writeConfig("control.json",
                                      R"({"train_batch_size": 8, "a\u0001b": "x\u001fy",
          "wandb": {"enabled": false, "project": "p\u0001q", "t\u0001": 1},
          "zero_optimization": {"stage": 1, "z\u0002": 3}})");
  const ToolRun r = runTool("check " + config.string() + " --json");
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  REQUIRE(r.out.find('\n') == r.out.size() - 1);
  const auto parsed = nlohmann::json::parse(r.out, nullptr, false);
  REQUIRE(parsed.is_object());
  CHECK(parsed["train_batch_size"] == 8);
  CHECK(parsed["in_effect"] == nlohmann::json({"train_batch_size", "zero_optimization"}));
  CHECK(parsed["not_in_effect"] == nlohmann::json({"wandb"}));
  CHECK(r.err.find("unknown key \"a\\x01b\"") != std::string::npos);
}

TEST_CASE("ds-config check: what is and is not in effect, and why", "[ds-config]") {
  const fs::path config = writeConfig("effects.json", R"({"train_batch_size": 8,
      "wandb": {"enabled": false}, "aio": {"block_size": 1048576},
      "zero_optimization": {"stage": 2, "contiguous_gradients": true}})");
  const ToolRun text = runTool("check " + config.string());
  INFO(text.err);
  REQUIRE(text.status == 0);
  CHECK(text.out.find("in effect:\n  train_batch_size: ") != std::string::npos);
  CHECK(text.out.find("  zero_optimization: stages 0-3") != std::string::npos);
  CHECK(text.out.find("  aio: the I/O engine of NVMe offload") != std::string::npos);
  CHECK(text.out.find("not in effect:\n  zero_optimization.contiguous_gradients: no effect here") !=
        std::string::npos);
  CHECK(text.out.find("  wandb: switched off (not implemented here)") != std::string::npos);

  const fs::path on =
      writeConfig("on.json", R"({"train_batch_size": 8, "wandb": {"enabled": true}})");
  const ToolRun refused = runTool("check " + on.string());
  CHECK(refused.status == 2);
  CHECK(refused.err.find("wandb: the Weights & Biases monitor is not implemented; set "
                         "\"enabled\": false or remove the block") != std::string::npos);
}

TEST_CASE("ds-config: invalid input exits 2 with the reason on stderr", "[ds-config]") {
  const fs::path bad = writeConfig(
      "bad.json",
      R"({"train_batch_size": 8, "scheduler": {"type": "WarmupDecayLR", "params": {"total_num_steps": 0}}})");
  struct Row {
    std::string args;
    std::string message;
  };
  const std::vector<Row> rows = {
      {"check " + bad.string(),
       "scheduler.params.total_num_steps: expected an integer >= 1, got 0"},
      {"schedule " + bad.string() + " --steps 3", "total_num_steps: expected an integer >= 1"},
      {"check " + (scratch() / "missing.json").string(), "missing.json"},
      {"check " + bad.string() + " --world-size 0", "--world-size"},
      {"check " + bad.string() + " --bogus", "--bogus"},
      {"schedule " + bad.string(), "--steps"},
      {"", "subcommand"},
      {"check " +
           writeConfig("batch3.json", R"({"train_batch_size": 8,
          "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 1})")
               .string() +
           " --world-size 3",
       "train_batch_size"},
  };
  for (const Row& r : rows) {
    INFO("ds-config " << r.args);
    const ToolRun run = runTool(r.args);
    INFO(run.err);
    CHECK(run.status == 2);
    CHECK(run.out.empty());
    CHECK(run.err.find(r.message) != std::string::npos);
  }
}

TEST_CASE("ds-config check: a refusal names its file once, then the key", "[ds-config]") {
  const std::string elastic =
      R"("elasticity": {"enabled": true, "max_train_batch_size": 4, "micro_batch_sizes": [2],)"
      R"( "min_gpus": 1, "max_gpus": 4, "version": 0.1})";
  const fs::path json = writeConfig("elastic-batch.json", "{\"train_batch_size\": 8, " + elastic + "}");
  const fs::path yml = writeConfig("layers.yml", "num-layers: two\n");
  for (const auto& [file, rest] :
       std::vector<std::pair<fs::path, std::string>>{{json, ": elasticity: train_batch_size"},
                                                     {yml, ": num-layers: expected an integer"}}) {
    const ToolRun run = runTool("check " + file.string());
    INFO(run.err);
    CHECK(run.status == 2);
    CHECK(run.err.find("ds-config: error: " + file.string() + rest) != std::string::npos);
    CHECK(run.err.find(file.string() + ": " + file.string()) == std::string::npos);
  }
}

TEST_CASE("ds-config schedule --json: the library's values, exactly", "[ds-config]") {
  struct Case {
    std::string config;
    bool momentum;
  };
  const std::vector<Case> cases = {
      {R"({"train_batch_size": 8, "optimizer": {"type": "Adam", "params": {"lr": 0.02}},
           "scheduler": {"type": "OneCycle", "params": {"cycle_min_lr": 0.001,
           "cycle_max_lr": 0.01, "cycle_first_step_size": 3, "decay_step_size": 2,
           "decay_lr_rate": 0.3}}})",
       true},
      {R"({"train_batch_size": 8, "optimizer": {"type": "AdamW", "params": {"lr": 0.02}},
           "scheduler": {"type": "WarmupCosineLR", "params": {"total_num_steps": 12,
           "warmup_num_steps": 4}}})",
       false},
      {R"({"train_batch_size": 8, "optimizer": {"type": "Adam", "params": {"lr": 0.005}}})", false},
  };
  for (const Case& c : cases) {
    INFO(c.config);
    const fs::path path = writeConfig("schedule.json", c.config);
    const ToolRun run = runTool("schedule " + path.string() + " --steps 17 --json");
    INFO(run.err);
    REQUIRE(run.status == 0);
    REQUIRE(std::count(run.out.begin(), run.out.end(), '\n') == 1);
    const nlohmann::json rows = nlohmann::json::parse(run.out);
    REQUIRE(rows.size() == 17);

    const DeepSpeedConfig config = parseDeepSpeedConfig(c.config, 1, "schedule.json");
    std::unique_ptr<LrSchedule> schedule;
    if (config.scheduler)
      schedule =
          makeLrSchedule(*config.scheduler, config.optimizer->lr(), config.optimizer->momentum());
    for (size_t i = 0; i < rows.size(); ++i) {
      INFO("update " << i << ": " << rows[i].dump());
      CHECK(rows[i]["step"] == i);
      const double lr = schedule ? schedule->lr() : config.optimizer->lr();
      CHECK(rows[i]["lr"].get<double>() == lr);  // shortest round-trip text: bit-exact
      CHECK(rows[i].contains("momentum") == c.momentum);
      if (c.momentum) CHECK(rows[i]["momentum"].get<double>() == *schedule->momentum());
      if (schedule) schedule->step();
    }
  }
}

TEST_CASE("ds-config schedule: an 80-column chart, sampled for long runs", "[ds-config]") {
  const fs::path path = writeConfig(
      "chart.json", R"({"train_batch_size": 8, "scheduler": {"type": "OneCycle", "params": {
      "cycle_min_lr": 0.0001, "cycle_max_lr": 0.001, "cycle_first_step_size": 400}}})");
  const ToolRun longRun = runTool("schedule " + path.string() + " --steps 1000");
  REQUIRE(longRun.status == 0);
  std::istringstream lines(longRun.out);
  std::string line;
  int rows = 0;
  while (std::getline(lines, line)) {
    INFO(line);
    CHECK(line.size() <= 80);
    rows += line.find('|') != std::string::npos;
  }
  CHECK(rows == 40);
  CHECK(longRun.out.find("OneCycle, 1000 optimizer updates") != std::string::npos);
  CHECK(longRun.out.find("momentum") != std::string::npos);
  // The peak (update 400, lr 0.001) is a sampled row only by luck; the last row is always there.
  CHECK(longRun.out.find("     999  ") != std::string::npos);

  const ToolRun shortRun = runTool("schedule " + path.string() + " --steps 5");
  REQUIRE(shortRun.status == 0);
  CHECK(std::count(shortRun.out.begin(), shortRun.out.end(), '|') == 5);
}

TEST_CASE("ds-config check: NeoX YAML configs, merged, with the GPT they build", "[ds-config]") {
  const fs::path model = writeConfig("model.yml",
                                     "num-layers: 2\nhidden-size: 64\nnum-attention-heads: 4\n"
                                     "seq-length: 32\nmax-position-embeddings: 32\n");
  const fs::path train = writeConfig("train.yml",
                                     "data-path: data/x\ntokenizer-type: ByteTokenizer\n"
                                     "train-iters: 10\nbatch-size: 2\n"
                                     "bias-gelu-fusion: true\nzero_optimization: {stage: 2}\n");
  const ToolRun ok = runTool("check " + model.string() + "," + train.string() + " --world-size 3");
  INFO(ok.out << ok.err);
  REQUIRE(ok.status == 0);
  CHECK(ok.out.find("GPT: 126720 parameters (2 layers, hidden 64") != std::string::npos);
  CHECK(ok.out.find("train_batch_size 6 = micro 2 x accumulation 1 x 3 ranks") != std::string::npos);
  CHECK(ok.err.find("note: bias-gelu-fusion: no effect here") != std::string::npos);
  const ToolRun json = runTool("check " + model.string() + "," + train.string() + " --json");
  CHECK(nlohmann::json::parse(json.out)["gpt_parameters"] == 126720);

  const fs::path bad = writeConfig("bad.yml", "num-layers: 2\nhiden-size: 64\n");
  const ToolRun refused = runTool("check " + bad.string());
  CHECK(refused.status == 2);
  CHECK(refused.out.empty());
  CHECK(refused.err.find("hiden-size: unknown NeoX or DeepSpeed config key; did you mean "
                         "\"hidden-size\"?") != std::string::npos);
}

TEST_CASE("ds-config check: a rank that cannot fit this machine is a warning, one that cannot fit "
          "the nodes given or any machine is refused",
          "[ds-config]") {
  // About 4 GiB of activations for one micro-batch of 32 sequences of 1024 tokens.
  const std::string model = "num-layers: 4\nhidden-size: 256\nnum-attention-heads: 4\n"
                            "seq-length: 1024\nmax-position-embeddings: 1024\n"
                            "data-path: data/x\ntokenizer-type: ByteTokenizer\ntrain-iters: 10\n";
  const fs::path big = writeConfig("big.yml", model + "batch-size: 32\n");
  // This machine as if it had 1 GiB (the test hook of common/memory_budget.h).
  const std::string small = std::string(ds::kMemoryBudgetVariable) + "=1073741824 ";
  auto runWith = [](const std::string& env, const std::string& args) { return runTool(args, env); };
  const ToolRun here = runWith(small, "check " + big.string());
  INFO(here.out << here.err);
  CHECK(here.status == 0);
  CHECK(here.out.find(": OK (world size 1)") != std::string::npos);
  CHECK(here.err.find("warning: not on this machine: GPT job: batch-size 32 x seq-length 1024 "
                      "tokens needs at least") != std::string::npos);
  CHECK(here.err.find("--node-memory SIZE checks against theirs") != std::string::npos);

  const ToolRun nodes = runWith(small, "check " + big.string() + " --node-memory 1G");
  CHECK(nodes.status == 2);
  CHECK(nodes.err.find("but only 1.00 GiB is left under --node-memory 1G") != std::string::npos);
  const ToolRun roomy = runWith(small, "check " + big.string() + " --node-memory 64G");
  CHECK(roomy.status == 0);
  CHECK(roomy.err.find("not on this machine") == std::string::npos);

  // Petabytes of activations fit no machine: refused whatever the nodes.
  const fs::path huge = writeConfig("huge.yml", model + "batch-size: 1e7\n");
  const ToolRun nowhere = runWith("", "check " + huge.string());
  CHECK(nowhere.status == 2);
  CHECK(nowhere.err.find("is left under the largest machine there is (64 TiB)") != std::string::npos);

  for (const char* bad : {"12X", "-5G", "G", "1.5T"}) {
    const ToolRun typo = runWith("", "check " + big.string() + " --node-memory " + bad);
    INFO(bad);
    CHECK(typo.status == 2);
    CHECK(typo.err.find("--node-memory: \"" + std::string(bad) + "\" is not a size") !=
          std::string::npos);
  }
}

TEST_CASE("ds-config check: NeoX YAML that is not UTF-8 text, or a mistyped elasticity switch, is "
          "refused naming the key",
          "[ds-config]") {
  const std::string base = "num-layers: 2\nhidden-size: 64\nnum-attention-heads: 4\n"
                           "seq-length: 32\nmax-position-embeddings: 32\ndata-path: data/x\n"
                           "tokenizer-type: ByteTokenizer\ntrain-iters: 10\nbatch-size: 2\n";
  struct Case {
    const char* name;
    std::string text, message;
  };
  const std::vector<Case> cases = {
      {"a NeoX value", base + "norm: layernorm\xff\n",
       ":10: norm: the value \"layernorm\xef\xbf\xbd\" is not valid UTF-8 (byte 10)"},
      {"a DeepSpeed value", base + "wall_clock_breakdown: \"\xff\"\n",
       ":10: wall_clock_breakdown: the value"},
      {"a key", base + "zero_optimization:\n  st\xc3ge: 1\n", ":11: zero_optimization: a key"},
      {"elasticity.enabled", base + "elasticity:\n  enabled: \"yes\"\n",
       "elasticity.enabled: expected true or false, got \"yes\""},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    const ToolRun run = runTool("check " + writeConfig("bad-text.yml", c.text).string());
    INFO(run.err);
    CHECK(run.status == 2);
    CHECK(run.err.find(c.message) != std::string::npos);
  }
}

TEST_CASE("ds-config check: NeoX files as separate arguments, comma lists or JSON", "[ds-config]") {
  const fs::path model = writeConfig("m.yml",
                                     "num-layers: 2\nhidden-size: 64\nnum-attention-heads: 4\n"
                                     "seq-length: 32\nmax-position-embeddings: 32\n");
  const fs::path train =
      writeConfig("t.yml", "data-path: data/x\ntokenizer-type: ByteTokenizer\ntrain-iters: 10\n"
                           "batch-size: 2\n");
  for (const std::string& files : {model.string() + " " + train.string(),
                                   "\"" + model.string() + ", " + train.string() + "\""}) {
    const ToolRun r = runTool("check " + files + " --world-size 2");
    INFO(files << "\n" << r.out << r.err);
    CHECK(r.status == 0);
    CHECK(r.out.find("GPT: 126720 parameters") != std::string::npos);
    CHECK(r.out.find(model.string() + ", " + train.string() + ": OK") != std::string::npos);
  }
  const fs::path json = writeConfig(
      "neox.json",
      R"({"num-layers": 2, "hidden-size": 64, "num-attention-heads": 4, "seq-length": 32,
          "max-position-embeddings": 32, "data-path": "data/x", "train-iters": 10,
          "tokenizer-type": "ByteTokenizer",
          "train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 1}})");
  const ToolRun neox = runTool("check " + json.string());
  INFO(neox.out << neox.err);
  CHECK(neox.status == 0);
  CHECK(neox.out.find("GPT: 126720 parameters") != std::string::npos);
  const fs::path nonsense = writeConfig("nonsense.json", R"({"colour": "blue"})");
  const ToolRun refused = runTool("check " + nonsense.string());
  CHECK(refused.status == 2);
  CHECK(refused.err.find("nonsense.json: neither a NeoX nor a DeepSpeed config") !=
        std::string::npos);
}

TEST_CASE("ds-config check: every dataset's token ids must fit the tokenizer's vocabulary",
          "[ds-config]") {
  // Byte tokenizer: 257 ids (0..255 and end of document). `top` is a dataset's largest id.
  auto dataset = [](const std::string& name, int32_t top) {
    const std::string prefix = (scratch() / name).string();
    ds::runtime::IndexedDatasetWriter w(prefix, ds::runtime::TokenType::UInt16);
    std::vector<int32_t> tokens;
    for (int32_t t = 0; t < 40; ++t) tokens.push_back(t);
    tokens.push_back(top);
    w.addSequence(tokens);
    w.endDocument();
    w.finish();
    return prefix;
  };
  const std::string good = dataset("fits", 256), other = dataset("fits2", 100);
  const std::string bad = dataset("too-large", 1000);
  auto check = [&](const std::string& data) {
    const fs::path config =
        writeConfig("vocab.yml",
                    "num-layers: 1\nhidden-size: 16\nnum-attention-heads: 2\nseq-length: 8\n"
                    "max-position-embeddings: 8\ntrain-iters: 2\nbatch-size: 1\n"
                    "tokenizer-type: ByteTokenizer\n" +
                        data);
    return runTool("check " + config.string());
  };
  const ToolRun ok = check("train-data-paths: [" + good + ", " + other +
                           "]\ntrain-data-weights: [2, 1]\nvalid-data-paths: [" + good +
                           "]\ntest-data-paths: []\n");
  INFO(ok.out << ok.err);
  CHECK(ok.status == 0);
  CHECK(ok.out.find("iterations on " + good + ", " + other) != std::string::npos);
  const ToolRun refused = check("train-data-paths: [" + good +
                                "]\nvalid-data-paths: []\n"
                                "test-data-paths: [" +
                                bad + "]\n");
  INFO(refused.out << refused.err);
  CHECK(refused.status != 0);
  CHECK(refused.err.find(bad + ".bin: token id 1000 (sequence 0) does not fit the tokenizer's "
                               "vocabulary of 257 ids (0 .. 256)") != std::string::npos);
  const ToolRun single = check("data-path: " + bad + "\n");
  CHECK(single.status != 0);
  CHECK(single.err.find(bad + ".bin: token id 1000") != std::string::npos);
  // Data that is not here (checked before ds-preprocess ran, or away from the data) is a warning.
  const ToolRun absent = check("data-path: " + (scratch() / "not-made-yet").string() + "\n");
  CHECK(absent.status == 0);
  CHECK(absent.err.find("not-made-yet.idx: not found here, so its token ids are not checked") !=
        std::string::npos);
}

TEST_CASE("ds-config check: the shipped configs stay valid", "[ds-config]") {
  for (const std::string& config : {std::string("configs/ds_config.json"), std::string("configs/gpt_demo.yml")}) {
    const ToolRun r = runTool("check " + std::string(DS_SOURCE_DIR) + "/" + config + " --world-size 4");
    INFO(config << "\n" << r.out << r.err);
    CHECK(r.status == 0);
  }
}

TEST_CASE("ds-config memory: where offloaded optimizer state lives", "[ds-config]") {
  const fs::path nvme = writeConfig("nvme.json", R"({"train_batch_size": 8, "bf16": {"enabled": true},
      "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "nvme", "nvme_path": "/nvme"}}})");
  const ToolRun r = runTool("memory " + nvme.string() + " --params 1.3B --world-size 8");
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("offload_optimizer nvme: at stage 2 the master weights and optimizer states "
                   "(1.82 GiB per rank) live in a swap file in /nvme") != std::string::npos);
  // One sub-group (the default sub_group_size is 1e9): one slot holding all of it.
  CHECK(r.out.find("plus 1 swap slot(s) (buffer_count) of one sub-group each: 1.82 GiB") !=
        std::string::npos);
  const fs::path grouped = writeConfig("grouped.json", R"({"train_batch_size": 8, "bf16": {"enabled": true},
      "zero_optimization": {"stage": 2, "sub_group_size": 10000000,
                            "offload_optimizer": {"device": "nvme", "nvme_path": "/nvme"}}})");
  const ToolRun g = runTool("memory " + grouped.string() + " --params 1.3B --world-size 8");
  INFO(g.out << g.err);
  CHECK(g.out.find("plus 4 swap slot(s) (buffer_count) of one sub-group each: 0.45 GiB") !=
        std::string::npos);
  const fs::path cpu = writeConfig("cpu.json", R"({"train_batch_size": 8,
      "zero_optimization": {"stage": 1, "offload_optimizer": {"device": "cpu"}}})");
  CHECK(runTool("memory " + cpu.string() + " --params 1M").out.find("offload_optimizer cpu:") !=
        std::string::npos);
}

TEST_CASE("ds-config neox-keys is the table docs/neox-arguments.md shows", "[ds-config]") {
  const ToolRun run = runTool("neox-keys");
  REQUIRE(run.status == 0);
  const std::string page = slurp(fs::path(DS_SOURCE_DIR) / "docs" / "neox-arguments.md");
  const size_t table = page.find("\n| key |");
  REQUIRE(table != std::string::npos);
  INFO("regenerate the table as docs/neox-arguments.md says");
  CHECK(page.substr(table + 1) == run.out);
  // One row per key: NeoX's 297 documented arguments are all in it (test_neox_keys checks which).
  CHECK(std::count(run.out.begin(), run.out.end(), '\n') > 297);
}
