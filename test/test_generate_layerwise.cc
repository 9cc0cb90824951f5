// ds-generate reads a checkpoint layer by layer (runtime/engine/checkpoint_layers.h): on a GPT of
// about 300 MB of fp32 parameters saved at ZeRO 3 by two ranks, the real binary's peak RSS stays
// well under the model's size, and its text is the one the whole model gives when loaded through
// the engine at world 1 and sampled from fullParameters() (what ds-generate did before).
#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "runtime/comm/shm_communicator.h"
#include "runtime/config/neox_config.h"
#include "runtime/engine/engine.h"
#include "runtime/model/gpt.h"
#include "runtime/model/sampler.h"
#include "test/rank_threads.h"
#include "test/run_command.h"
#include "test/scratch_dir.h"

using namespace ds::runtime;

namespace {

// 24 layers of hidden 512: 75.7 M parameters, 303 MB in fp32.
constexpr const char* kNeox = R"({"num-layers": 24, "hidden-size": 512, "num-attention-heads": 8,
  "seq-length": 16, "max-position-embeddings": 16, "data-path": "x", "train-iters": 1,
  "batch-size": 1, "tokenizer-type": "ByteTokenizer", "seed": 5})";

NeoxConfig neoxFor(nlohmann::json merged, int stage, int64_t world) {
  merged["zero_optimization"] = {{"stage", stage}};
  merged["optimizer"] = {{"type", "SGD"}, {"params", {{"lr", 0.01}}}};
  return parseNeoxConfig(merged, world);
}

}  // namespace

TEST_CASE("ds-generate: a 300 MB checkpoint sampled layer by layer, peak RSS well under the model",
          "[generate]") {
  const std::string dir = ds::test::makeScratchDir("generate-layerwise");
  std::ofstream(dir + "/neox_config.json") << kNeox;
  const nlohmann::json merged = nlohmann::json::parse(kNeox);
  const NeoxConfig one = neoxFor(merged, 0, kOneReplica);
  const auto tokenizer = makeJobTokenizer(one.train);
  const GptConfig modelConfig = modelConfigFor(one.train, *tokenizer);
  const size_t modelBytes = Gpt(modelConfig).parameterCount() * sizeof(float);
  REQUIRE(modelBytes > size_t{250} << 20);
  {  // saved by two ranks at ZeRO 3: two shard files of half the model each
    const NeoxConfig two = neoxFor(merged, 3, 2);
    auto group = ShmCommunicator::inProcessGroup(2);
    ds::test::onThreads(2, [&](int r) {
      Gpt model(modelConfig);
      Engine engine(model, two.deepspeed, group[r], 5);
      engine.saveCheckpoint(dir, "global_step0");
    });
  }
  SamplingOptions sampling;
  sampling.maxNewTokens = 8;
  sampling.temperature = 0.8;
  sampling.topK = 20;
  sampling.seed = 3;
  std::vector<int32_t> expected;
  {  // the whole-model path: the engine's loader at world 1, then the flat buffer
    Gpt model(modelConfig);
    auto group = ShmCommunicator::inProcessGroup(1);
    Engine engine(model, one.deepspeed, group[0], 5);
    engine.loadCheckpoint(dir);
    const std::vector<float> params = engine.fullParameters();
    expected = generateTokens(model, params.data(), tokenizer->encode("hello"), sampling);
  }
  REQUIRE(expected.size() == 8);
  const ds::test::CommandOutcome run = ds::test::runCommand(
      std::string(DS_BIN_DIR) + "/ds-generate " + dir +
      " --prompt hello --max-new-tokens 8 --temperature 0.8 --top-k 20 --seed 3 --no-stop");
  INFO(run.output);
  REQUIRE(run.status == 0);
  CHECK(run.output.find("hello" + tokenizer->decode(expected) + "\n") != std::string::npos);
  std::smatch m;
  REQUIRE(std::regex_search(run.output, m,
                            std::regex(R"(peak RSS ([0-9.]+) MiB; parameters ([0-9.]+) MiB in )"
                                       R"(fp32, at most ([0-9.]+) MiB of them held)")));
  const double peakMiB = std::stod(m[1]), modelMiB = std::stod(m[2]), heldMiB = std::stod(m[3]);
  INFO("ds-generate on " << modelMiB << " MiB of parameters: peak RSS " << peakMiB
                         << " MiB, at most " << heldMiB << " MiB of layers held");
  CHECK(modelMiB == Approx(static_cast<double>(modelBytes) / (1 << 20)).epsilon(1e-3));
  CHECK(peakMiB < modelMiB / 3);
  CHECK(heldMiB < modelMiB / 6);
}
