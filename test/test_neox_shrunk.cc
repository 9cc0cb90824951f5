// GPT-NeoX's own configs (test/neox/configs) shrunk in width, depth and sequence only, trained for
// 2 iterations through ds-launch on 2 ranks with their own tokenizer kind: LLaMA-2 (NeoX's
// default GPT-2 BPE), Mistral (sliding window, SentencePiece), pythia (Hugging Face tokenizer)
// and LLaMA-2 70B's grouped-query attention; NeoX's 20B on its 3D grid (pipe 2 x model 2, on the
// loopback hostfile's 4 ranks). The loss must be finite at both iterations.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "runtime/config/neox_config.h"
#include "test/bpe_test_files.h"
#include "test/launch_harness.h"
#include "test/scratch_dir.h"

using namespace ds::test;
using namespace std::chrono_literals;
namespace fs = std::filesystem;
using Json = nlohmann::json;

namespace {

const fs::path kNeox = fs::path(DS_SOURCE_DIR) / "test" / "neox" / "configs";
const fs::path kGolden = fs::path(DS_SOURCE_DIR) / "test" / "golden";

// The model's size in width, depth and sequence, nothing else: the keys NeoX's sizes are in.
void shrink(Json& c) {
  const int layers = 2;
  c["num-layers"] = layers;
  c["hidden-size"] = 64;
  c["num-attention-heads"] = 4;
  if (c.contains("num-kv-heads")) c["num-kv-heads"] = 2;
  if (c.contains("intermediate-size")) c["intermediate-size"] = 256;
  if (c.contains("mlp-multiple-of")) c["mlp-multiple-of"] = 16;
  c["seq-length"] = 32;
  c["max-position-embeddings"] = 32;
  if (c.contains("sliding-window-width")) c["sliding-window-width"] = 8;
  if (c.contains("attention-config"))  // [[kinds, count]]: the count follows the depth
    for (Json& group : c["attention-config"]) group[1] = layers;
  // Two iterations of one sample per rank.
  c["train-iters"] = 2;
  c["lr-decay-iters"] = 2;
  c["log-interval"] = 1;
  c["eval-interval"] = 2;
  c["eval-iters"] = 1;
  c["split"] = "90,10,0";
  for (const char* key : {"train_batch_size", "train_micro_batch_size_per_gpu",
                          "gradient_accumulation_steps", "checkpoint-factor", "save", "load"})
    c.erase(key);
  c["batch-size"] = 1;
}

struct Tokenizer {
  std::string type, vocabFile, mergeFile;
};

Tokenizer tokenizerFor(const Json& c, const SmallBpe& bpe) {
  const std::string type = c.value("tokenizer-type", "GPT2BPETokenizer");
  if (type == "HFTokenizer") return {type, (kGolden / "hf_tokenizer.json").string(), ""};
  if (type == "SPMTokenizer") return {type, (kGolden / "spm_llama_like.model").string(), ""};
  return {type, bpe.vocabFile, bpe.mergeFile};
}

}  // namespace

TEST_CASE("neox corpus: NeoX's configs shrunk in size train 2 iterations through ds-launch",
          "[gpt][launch]") {
  struct Job {
    std::vector<std::string> files;
    std::string model;  // what the job's model line must say
    int pipe = 1, modelParallel = 1;  // a grid: 2 loopback nodes x 2 ranks instead of 1 x 2
    int ranks = 2;                    // 4: 2 loopback nodes x 2 ranks
  };
  const std::vector<Job> jobs = {
      {{"llama2/7B.yml", "llama/train_config.yml"}, "rmsnorm, swiglu, no linear biases"},
      {{"mistral/7B.yml", "llama/train_config.yml"},
       "2 kv heads, no linear biases, untied output, "
       "sliding window 8"},
      {{"pythia/160M.yml"}, "layernorm, gelu, untied output, gpt-j residual"},
      {{"llama2/70B.yml", "llama/train_config.yml"}, "swiglu, 2 kv heads"},
      // NeoX's dropless MoE (8 experts, Sinkhorn routing, ZeRO 1, bf16, partitioned activation
      // checkpoints), on 2 loopback nodes x 2 ranks of data parallelism.
      {{"125M-dmoe.yml"}, "MoE: 8 experts, top-1 sinkhorn dropless, every layer", 1, 1, 4},
      // 20B.yml (pipe 4 x model 2 over 96 GPUs) on 4 ranks: the grid is the only change besides
      // the size; it keeps its fp16, ZeRO 1, untied output, GPT-J residual and activation
      // checkpointing.
      {{"20B.yml"}, "layernorm, gelu, untied output, gpt-j residual", 2, 2},
  };
  for (const auto& [files, model, pipe, modelParallel, ranks] : jobs) {
    DYNAMIC_SECTION(files[0]) {
      const std::string dir = makeScratchDir("neox-shrunk");
      std::vector<std::string> paths;
      for (const std::string& f : files) paths.push_back((kNeox / f).string());
      Json c = ds::runtime::readNeoxYaml(paths);
      shrink(c);
      const bool grid = pipe * modelParallel > 1;
      if (grid) {
        // readNeoxYaml gives NeoX keys their hyphenated names whatever the file spells (20B.yml:
        // pipe_parallel_size): the file's values must be there under those names to be replaced.
        REQUIRE(c.contains("pipe-parallel-size"));
        REQUIRE(c.contains("model-parallel-size"));
        CHECK(!c.contains("pipe_parallel_size"));
        CHECK(!c.contains("model_parallel_size"));
        c["pipe-parallel-size"] = pipe;
        c["model-parallel-size"] = modelParallel;
      }
      const SmallBpe bpe = writeSmallBpe(dir);
      const Tokenizer tok = tokenizerFor(c, bpe);
      c["vocab-file"] = tok.vocabFile;
      if (!tok.mergeFile.empty()) c["merge-file"] = tok.mergeFile;
      c["data-path"] = "data/corpus_text_document";

      std::string text;
      for (int d = 0; d < 40; ++d)
        text += "The quick brown fox " + std::to_string(d) + " jumps over the lazy dog. ";
      writeFile(dir + "/corpus.txt", text + "\n");
      fs::create_directories(dir + "/data");
      std::string pre = "cd " + dir + " && " + DS_BIN_DIR +
                        "/ds-preprocess --input corpus.txt --output-prefix data/corpus "
                        "--append-eod --tokenizer-type " +
                        tok.type + " --vocab-file " + tok.vocabFile;
      if (!tok.mergeFile.empty()) pre += " --merge-file " + tok.mergeFile;
      pre += " >pre.out 2>&1";
      INFO(readFile(dir + "/pre.out"));
      REQUIRE(std::system(pre.c_str()) == 0);

      writeFile(dir + "/job.json", c.dump(2));
      writeFile(dir + "/hostfile", grid || ranks == 4 ? "127.0.0.1 slots=2\n127.0.0.2 slots=2\n"
                                                      : "127.0.0.1 slots=2\n");
      const auto job = startLaunch(dir, {"--hostfile", "hostfile", "--master_port", "0",
                                         "--log_dir", "logs", "train", "--config", "job.json"});
      const auto status = waitExit(job, 240s);
      const std::string out = readFile(dir + "/stdout");
      INFO(out << readFile(dir + "/stderr"));
      REQUIRE(status == 0);
      const std::regex loss(R"(\[rank 0\] iteration (\d+)/2 \| lm_loss ([^ ]+))");
      int finite = 0;
      for (std::sregex_iterator it(out.begin(), out.end(), loss), end; it != end; ++it)
        if (std::isfinite(std::stod((*it)[2].str()))) ++finite;
      CHECK(finite == 2);
      std::string modelLine = out.substr(out.find("[rank 0] model: GPT"));
      if (grid)
        CHECK_THAT(modelLine.substr(0, modelLine.find('\n')),
                   Catch::Contains("1 data-parallel replicas (pipe " + std::to_string(pipe) +
                                   " x model " + std::to_string(modelParallel) + " ranks each)"));
      modelLine =
          std::regex_replace(modelLine.substr(0, modelLine.find(';')), std::regex("\n"), " ");
      CHECK_THAT(modelLine, Catch::Contains(model));
      fs::remove_all(dir);
    }
  }
}
