// ds-generate through the real binary on bad input: a missing, malformed or non-object model
// config, a config naming an impossible model, a directory without checkpoints, bad flags. Each
// exits 2 with one line naming the file or flag, never a crash.

#include <catch2/catch.hpp>
#include <fstream>
#include <string>

#include "test/run_command.h"
#include "test/scratch_dir.h"

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
