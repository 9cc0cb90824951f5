// The engine with a model on an accelerator whose memory host code cannot touch (issue 47): the
// GPT on the guarded CPU backend (kernels/cpu/guarded_accelerator.h), the engine's states in host
// memory, each layer handed across by runtime/engine/device_layer_bridge.h. The model's passes run
// on the "device", the engine's arithmetic is the CPU's, so every loss and parameter must equal
// the all-CPU run's bit for bit, at every ZeRO stage and precision.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "common/error.h"
#include "kernels/cpu/guarded_accelerator.h"
#include "runtime/engine/engine.h"
#include "runtime/model/gpt.h"
#include "test/engine_harness.h"
#include "test/float_arrays.h"
#include "test/small_gpt.h"

using namespace ds;
using namespace ds::runtime;
using ds::test::bitwiseEqual;
using ds::test::randomBatch;
using ds::test::smallConfig;

TEST_CASE(
    "GPT on a device through the engine: every ZeRO stage and precision trains to the CPU's "
    "parameters bit for bit",
    "[engine][accelerator][device]") {
  // The engine keeps its states in host memory and hands each layer across
  // (runtime/engine/device_layer_bridge.h): the model's passes run on the device, the rest is
  // the CPU's arithmetic, so nothing may differ.
  kernels::Accelerator& device = kernels::guardedCpuAccelerator();
  GptConfig c = smallConfig();
  c.posEmb = PositionEmbedding::Rotary;
  c.hiddenDropout = 0.1;
  for (int world : {1, 2})
    for (int stage : {0, 1, 2, 3})
      for (const char* precision : {"fp32", "bf16", "fp16"}) {
        if (world == 2 && stage == 1) continue;  // stage 1's reduction is stage 0's, sliced
        CAPTURE(world, stage, precision);
        const std::string json = ds::test::engineConfig(
            stage, precision, R"("gradient_accumulation_steps": 2, "gradient_clipping": 1.0)");
        std::vector<std::vector<float>> params[2];
        std::vector<float> losses[2];
        for (int onDevice : {0, 1}) {
          ds::runtime::ShmOptions options;
          options.chunkBytes = ds::test::kTestChunkBytes;
          auto group = ds::runtime::ShmCommunicator::inProcessGroup(world, options);
          params[onDevice].resize(world);
          std::vector<std::vector<float>> rankLosses(world);
          ds::test::onThreads(world, [&](int r) {
            const auto config = ds::runtime::parseDeepSpeedConfig(json, world, "test-config");
            Gpt model = onDevice ? Gpt(c, {}, device) : Gpt(c);
            ds::runtime::Engine engine(model, config, group[r], 7);
            const int64_t micro = config.batch.microBatchPerGpu;
            for (int step = 0; step < 3; ++step)
              for (int m = 0; m < 2; ++m) {
                const uint64_t seed = static_cast<uint64_t>(100 * step + 10 * m + r);
                rankLosses[r].push_back(
                    engine.forwardBackward(randomBatch(c, static_cast<size_t>(micro), 12, seed)));
                engine.step();
              }
            params[onDevice][r] = engine.fullParameters();
          });
          for (const auto& l : rankLosses)
            losses[onDevice].insert(losses[onDevice].end(), l.begin(), l.end());
        }
        CHECK(bitwiseEqual(losses[1], losses[0]));
        for (int r = 0; r < world; ++r) CHECK(bitwiseEqual(params[1][r], params[0][r]));
      }
}
