// Every refusal a rank can make of its config and files while it sets a job up, made first by
// ds-config check and ds-launch: exit 2 with the rank's own message and nothing started (the
// ranks call the same checks, so the words are one). The few a launcher cannot make (it does not
// build the model) are made by ds-config check, and the ranks then give the same message. And
// what the checks let through, the ranks run: blend weights of any finite size.
#include <catch2/catch.hpp>
#include <fstream>
#include <string>
#include <vector>

#include "test/byte_corpus.h"
#include "test/run_command.h"
#include "test/scratch_dir.h"

namespace {

using ds::test::CommandOutcome;

CommandOutcome run(const std::string& dir, const std::string& command) {
  return ds::test::runCommand("cd " + dir + " && timeout 120 " + command, 1 << 16);
}

void writeText(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// The job's model and training keys; each case adds its data and whatever it breaks.
std::string gptYaml(const std::string& extra, int seqLength = 16,
                    const std::string& data = "data-path: data/x\n") {
  const std::string seq = std::to_string(seqLength);
  return "num-layers: 2\nhidden-size: 32\nnum-attention-heads: 4\nseq-length: " + seq +
         "\nmax-position-embeddings: " + seq +
         "\npos-emb: learned\ntokenizer-type: ByteTokenizer\ntrain-iters: 2\nlr: 0.01\n"
         "batch-size: 1\nlog-interval: 1\neval-interval: 2\neval-iters: 1\n" +
         data + extra;
}

const std::string kBlend =
    "train-data-paths: [data/x, data/tiny]\nvalid-data-paths: []\ntest-data-paths: []\n";

// data/x: 40 documents of 46 to 136 tokens; data/tiny: one of 46; data/empty: none; data/bad: an
// index that is not one.
std::string dataDir(const std::string& name) {
  const std::string dir = ds::test::makeScratchDir(name);
  ds::test::writeByteCorpus(dir + "/data/x", 40, [](int d) { return 1 + d % 3; });
  ds::test::writeByteCorpus(dir + "/data/tiny", 1, [](int) { return 1; });
  ds::test::writeByteCorpus(dir + "/data/empty", 0, [](int) { return 1; });
  writeText(dir + "/data/bad.idx", "not an index");
  writeText(dir + "/data/bad.bin", "");
  writeText(dir + "/data/empty-tokenizer.json",
            R"({"model": {"type": "BPE", "vocab": {}, "merges": []}})");
  return dir;
}

enum class Refuses {
  CheckAndLaunch,  // ds-config check and ds-launch, before any rank starts
  CheckThenRanks,  // ds-config check; ds-launch cannot (it builds no model): its ranks refuse
  Launch,          // ds-launch: ds-config check does not know that the built-in trainer reads it
};

struct Refusal {
  const char* name;
  const char* file;
  std::string content;
  int world;
  std::string message;
  Refuses who = Refuses::CheckAndLaunch;
  std::string env = "";  // "env NAME=VALUE " for both commands
};

}  // namespace

TEST_CASE("robustness: what a rank refuses at setup, ds-config check and ds-launch refuse first") {
  const std::string dir = dataDir("setup-refusals");
  const std::string bin = DS_BIN_DIR;
  const std::vector<Refusal> cases = {
      // Megatron's even slices (the model's construction on every model rank).
      {"kv heads over model ranks", "kv.yml", gptYaml("num-kv-heads: 1\nmodel-parallel-size: 2\n"),
       2,
       "num-kv-heads: 1 does not split evenly over model-parallel-size 2 (every model rank holds "
       "an equal share); use a multiple of 2 kv heads, or a model-parallel-size that divides 1"},
      {"heads over model ranks", "heads.yml", gptYaml("model-parallel-size: 3\n"), 3,
       "num-attention-heads: 4 does not split evenly over model-parallel-size 3"},
      {"MLP width over model ranks", "ffn.yml",
       gptYaml("intermediate-size: 66\nmodel-parallel-size: 4\n"), 4,
       "intermediate-size (the MLP's inner width after NeoX's rounding): 66 does not split evenly "
       "over model-parallel-size 4"},
      {"qk norm over model ranks", "qk.yml",
       gptYaml("use-qk-layernorm: true\nmodel-parallel-size: 2\n"), 2,
       "use-qk-layernorm: not supported with model-parallel-size > 1"},
      // The engine's optimizer on a sliced model, and the profiler on a pipeline.
      {"Lamb over model ranks", "lamb.yml",
       gptYaml("model-parallel-size: 2\noptimizer:\n  type: Lamb\n  params: {lr: 0.01}\n"), 2,
       "optimizer: Lamb is not supported with model-parallel-size > 1"},
      {"flops profiler on a pipeline", "flops.yml",
       gptYaml("pipe-parallel-size: 2\nflops_profiler: {enabled: true}\n"), 2,
       "flops_profiler: not supported with pipe-parallel-size 2 (a stage holds only its layers)"},
      // The data: each split the job reads, and each blend's weights.
      {"train split without a sample", "train.yml", gptYaml("split: 1,1000,0\n"), 1,
       "data-path: data/x: the train part of split \"1,1000,0\" (documents 0..0 of 40): the "
       "split's documents hold 0 tokens, not enough for one sample of 17; lower seq-length"},
      {"valid split without a sample", "valid.yml", gptYaml("split: 969,30,1\n", 64), 1,
       "data-path: data/x: the valid part of split \"969,30,1\" (documents 39..40 of 40): the "
       "split's documents hold 46 tokens, not enough for one sample of 65; lower seq-length, give "
       "the valid part of split more weight, or set eval-iters: 0"},
      {"blended dataset without a sample", "blend.yml", gptYaml("", 64, kBlend), 1,
       "train-data-paths: data/tiny: the split's documents hold 46 tokens, not enough for one "
       "sample of 65; lower seq-length, or remove the dataset from train-data-paths"},
      {"weights by documents, all in one dataset", "bydocs.yml",
       gptYaml("weight-by-num-documents: true\n", 16,
               "train-data-paths: [data/x, data/empty]\nvalid-data-paths: []\n"
               "test-data-paths: []\n"),
       1, "weight-by-num-documents: every document is in one dataset"},
      {"label dataset out of line", "labels.yml",
       gptYaml("", 16,
               "train-data-paths: [data/x]\nvalid-data-paths: []\ntest-data-paths: []\n"
               "train-label-data-paths: [data/tiny]\n"),
       1,
       "train-label-data-paths: label dataset data/tiny does not line up with its text dataset "
       "data/x: 1 documents against 40"},
      {"unreadable dataset", "bad.yml", gptYaml("", 16, "data-path: data/bad\n"), 1,
       "data/bad.idx: "},
      // DeepSpeed's runtime check of the elasticity block against the scheduler's.
      {"elasticity changed since scheduled", "elastic.json",
       R"({"elasticity": {"enabled": true, "max_train_batch_size": 16, "micro_batch_sizes": [2, 4],
           "min_gpus": 1, "max_gpus": 4, "version": 0.1}})",
       1,
       "elastic.json: elasticity.max_train_batch_size: elastic config "
       "'max_acceptable_batch_size=32' seen by the resource scheduler "
       "(DEEPSPEED_ELASTICITY_CONFIG) does not match max_acceptable_batch_size=16",
       Refuses::CheckAndLaunch,
       "env DEEPSPEED_ELASTICITY_CONFIG='{\"max_train_batch_size\": 32, \"micro_batch_sizes\": [2, "
       "4], \"version\": 0.1}' "},
      // The tokenizer file every rank loads first (on a grid, whose model the launcher's memory
      // pre-flight does not size).
      {"tokenizer file of a pipeline job", "tokenizer.yml",
       [] {
         std::string yaml = gptYaml("pipe-parallel-size: 2\nvocab-file: data/empty-tokenizer.json\n");
         yaml.replace(yaml.find("ByteTokenizer"), 13, "HFTokenizer");
         return yaml;
       }(),
       2, "data/empty-tokenizer.json: pre_tokenizer: is null"},
      // A pipeline cut needs the model's layer sizes and the tokenizer's vocabulary.
      {"pipeline stage without layers", "pipe.yml",
       gptYaml("pipe-parallel-size: 4\npipe-partition-method: uniform\n"), 4,
       "pipe-partition-method: \"uniform\" leaves pipeline stage 2 of 4 without layers",
       Refuses::CheckThenRanks},
      {"flops profiler on the MLP job", "mlp.json",
       R"({"train_batch_size": 2, "flops_profiler": {"enabled": true}})", 1,
       "flops_profiler: profiles the GPT trainer (a NeoX YAML config); set \"enabled\": false "
       "for the MLP job",
       Refuses::Launch},
  };
  for (const Refusal& c : cases) {
    INFO(c.name);
    writeText(dir + "/" + c.file, c.content);
    const std::string hosts = "hosts" + std::to_string(c.world);
    writeText(dir + "/" + hosts, "127.0.0.1 slots=" + std::to_string(c.world) + "\n");
    const std::string launch = c.env + bin + "/ds-launch -H " + hosts +
                               " --master_port 0 --log_dir logs train --config " + c.file;
    if (c.who != Refuses::Launch) {
      const CommandOutcome check = run(dir, c.env + bin + "/ds-config check " + c.file +
                                                " --world-size " + std::to_string(c.world));
      INFO(check.output);
      CHECK(check.status == 2);
      CHECK(check.output.find(c.message) != std::string::npos);
    }
    const CommandOutcome launched = run(dir, launch);
    INFO(launched.output.substr(0, 4000));
    CHECK(launched.output.find(c.message) != std::string::npos);
    if (c.who == Refuses::CheckThenRanks) {
      CHECK(launched.status == 1);
      CHECK(launched.output.find("failed: " + c.message) != std::string::npos);
    } else {
      CHECK(launched.status == 2);
      CHECK(launched.output.find("[rank") == std::string::npos);
    }
  }
}

TEST_CASE("robustness: blend weights of any finite size train, as the check says they will") {
  const std::string dir = dataDir("huge-weights");
  const std::string bin = DS_BIN_DIR;
  writeText(dir + "/hostfile", "127.0.0.1 slots=1\n");
  struct Case {
    const char* file;
    std::string content;
    std::string data;  // the "data:" line's description of the blends
  };
  const std::vector<Case> cases = {
      // The sum of the weights is +inf: every weight became 0 and the ranks died of SIGFPE.
      {"huge.yml",
       gptYaml("", 16,
               "train-data-paths: [data/x, data/x]\nvalid-data-paths: [data/x, data/x]\n"
               "test-data-paths: []\ntrain-data-weights: [1e308, 1e308]\n"
               "valid-data-weights: [1.5e308, 0.5e308]\n"),
       "train blend of data/x (weight 0.5, 2 samples, 1 epochs), data/x (weight 0.5, 2 samples, "
       "1 epochs); validation blend of data/x (weight 0.75, 2 samples, 1 epochs), data/x (weight "
       "0.25, 1 samples, 1 epochs)"},
      // Every (documents share)^alpha underflows to 0: the weight goes to the largest dataset.
      {"alpha.yml",
       gptYaml("weight-by-num-documents: true\nweighted-sampler-alpha: 1e308\n", 16,
               "train-data-paths: [data/tiny, data/x]\nvalid-data-paths: []\n"
               "test-data-paths: []\n"),
       "train blend of data/tiny (weight 0, 1 samples, 1 epochs), data/x (weight 1, 3 samples"},
  };
  for (const Case& c : cases) {
    INFO(c.file);
    writeText(dir + "/" + c.file, c.content);
    const CommandOutcome check = run(dir, bin + "/ds-config check " + c.file);
    INFO(check.output);
    CHECK(check.status == 0);
    const CommandOutcome trained =
        run(dir,
            bin + "/ds-launch -H hostfile --master_port 0 --log_dir logs train --config " + c.file);
    INFO(trained.output.substr(0, 4000));
    CHECK(trained.status == 0);
    CHECK(trained.output.find("[rank 0] data: " + c.data) != std::string::npos);
    CHECK(trained.output.find("iteration 2/2") != std::string::npos);
  }
}

TEST_CASE("robustness: checkpoint-factor 0 is no periodic saves, as its refusal says") {
  const std::string dir = dataDir("checkpoint-factor");
  const std::string bin = DS_BIN_DIR;
  writeText(dir + "/negative.yml", gptYaml("checkpoint-factor: -5\n"));
  const CommandOutcome negative = run(dir, bin + "/ds-config check negative.yml");
  CHECK(negative.status == 2);
  CHECK(negative.output.find("checkpoint-factor: expected a number in (0, 1e15], or 0 or null for "
                             "no periodic saves; got -5") != std::string::npos);
  writeText(dir + "/zero.yml", gptYaml("checkpoint-factor: 0\nsave: ck\n"));
  writeText(dir + "/hostfile", "127.0.0.1 slots=1\n");
  CHECK(run(dir, bin + "/ds-config check zero.yml").status == 0);
  const CommandOutcome trained = run(
      dir, bin + "/ds-launch -H hostfile --master_port 0 --log_dir logs train --config zero.yml");
  INFO(trained.output.substr(0, 4000));
  CHECK(trained.status == 0);
  // Only the save NeoX makes after the last iteration whatever the schedule.
  CHECK(trained.output.find("saved checkpoint ck/global_step2") != std::string::npos);
  CHECK(trained.output.find("saved checkpoint ck/global_step1") == std::string::npos);
}
