// ds-generate through the real binary on bad input: a missing, malformed or non-object model
// config, a config naming an impossible model or a damaged tokenizer, a directory without
// checkpoints, bad flags. Each exits 2 with one line naming the file or flag, never a crash.

#include <catch2/catch.hpp>
#include <fstream>
#include <iterator>
#include <string>

#include "test/run_command.h"
#include "test/scratch_dir.h"
#include "test/spm_charsmap_builder.h"

namespace {

int runGenerate(const std::string& args, std::string& output) {
  const ds::test::CommandOutcome r =
      ds::test::runCommand(std::string(DS_BIN_DIR) + "/ds-generate " + args);
  output = r.output;
  return r.status;
}

}  // namespace

TEST_CASE("ds-generate: bad model configs, checkpoints and flags exit 2 naming the problem") {
  const std::string dir = ds::test::makeScratchDir("generate");
  const std::string valid =
      R"({"num-layers": 1, "hidden-size": 16, "num-attention-heads": 2, "seq-length": 8,
          "max-position-embeddings": 8, "data-path": "x", "train-iters": 1, "batch-size": 1,
          "tokenizer-type": "ByteTokenizer"})";
  struct Case {
    const char* config;  // nullptr: no config file
    const char* args;
    const char* message;
  };
  const Case cases[] = {
      {nullptr, "--prompt hi", "neox_config.json: missing"},
      {"[1, 2]", "--prompt hi", "expected a JSON object of NeoX config keys"},
      {"{not json", "--prompt hi", "neox_config.json: invalid JSON at byte 3"},
      {R"({"num-layers": -3})", "--prompt hi", "num-layers: expected an integer"},
      {R"({"num-layers": 1000000, "hidden-size": 1000000, "num-attention-heads": 1,
           "data-path": "x", "train-iters": 1, "batch-size": 1})",
       "--prompt hi", "at most 1e12"},
      {nullptr, "", "--prompt is required"},
      {nullptr, "--prompt hi --temperature -1", "--temperature"},
      {nullptr, "--prompt hi --max-new-tokens 0", "--max-new-tokens"},
      {"VALID", "--prompt hi", "latest"},  // a config but no checkpoint
      {"VALID", "--prompt ''", "--prompt: give at least one character"},
  };
  for (const Case& c : cases) {
    INFO(c.args << " with " << (c.config ? c.config : "no config"));
    std::remove((dir + "/neox_config.json").c_str());
    if (c.config)
      std::ofstream(dir + "/neox_config.json")
          << (std::string(c.config) == "VALID" ? valid : std::string(c.config));
    std::string out;
    const int status = runGenerate(dir + " " + c.args, out);
    INFO(out);
    CHECK(status == 2);
    CHECK(out.find(c.message) != std::string::npos);
  }
  std::string out;
  CHECK(runGenerate(dir + "/nowhere --prompt hi", out) == 2);
}

TEST_CASE("ds-generate: a SentencePiece model with damaged normalization rules exits 2") {
  const std::string dir = ds::test::makeScratchDir("generate-spm-charsmap");
  std::ifstream in(std::string(DS_SOURCE_DIR) + "/test/golden/spm_llama_like.model",
                   std::ios::binary);
  const std::string model{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  const auto damaged = ds::test::damagedSpmModels(model);
  REQUIRE(damaged.size() > 3);
  for (const auto& d : {damaged[2], damaged.back()}) {
    INFO(d.name);
    const std::string file = dir + "/damaged.model";
    std::ofstream(file, std::ios::binary | std::ios::trunc) << d.model;
    std::ofstream(dir + "/neox_config.json", std::ios::trunc)
        << R"({"num-layers": 1, "hidden-size": 16, "num-attention-heads": 2, "seq-length": 8,
               "max-position-embeddings": 8, "data-path": "x", "train-iters": 1,
               "batch-size": 1, "tokenizer-type": "SPMTokenizer", "vocab-file": ")"
        << file << "\"}";
    std::string out;
    CHECK(runGenerate(dir + " --prompt 'Quiet aaaa'", out) == 2);
    INFO(out);
    CHECK(out.find("vocab-file " + file + ": " + d.field + ": " + d.why) != std::string::npos);
  }
}
