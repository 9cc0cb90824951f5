// offload_optimizer: training with the optimizer state on NVMe (a swap file per rank) or "cpu"
// gives bitwise the parameters of training without it, at every stage that allows it, in fp32
// and bf16, with several sub-groups streamed; checkpoints move between offloaded and resident
// runs; no swap file is ever left behind; bad settings are refused by name.
#include <atomic>
#include <catch2/catch.hpp>
#include <filesystem>

#include "common/error.h"
#include "runtime/offload/optimizer_swapper.h"
#include "test/engine_harness.h"
#include "test/scratch_dir.h"

using ds::test::engineConfig;
using ds::test::trainRanks;

namespace {

std::string offload(const std::string& device, const std::string& dir) {
  return R"("offload_optimizer": {"device": ")" + device + R"(", "nvme_path": ")" + dir + R"("})";
}

// engineConfig's zero block with offload and a small sub_group_size spliced in.
std::string config(int stage, const std::string& precision, const std::string& offloadBlock) {
  std::string json = engineConfig(stage, precision);
  const std::string anchor = "\"stage3_param_persistence_threshold\": 0";
  json.replace(json.find(anchor), anchor.size(),
               anchor + ", \"sub_group_size\": 1500" +
                   (offloadBlock.empty() ? std::string() : ", " + offloadBlock));
  return json;
}

size_t filesIn(const std::string& dir) {
  size_t n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) n += entry.exists();
  return n;
}

}  // namespace

TEST_CASE("offload_optimizer: nvme and cpu train to bitwise the parameters of no offload",
          "[offload]") {
  const std::string dir = ds::test::makeScratchDir("offload-nvme");
  for (int stage : {1, 2, 3})
    for (const std::string precision : {"fp32", "bf16"}) {
      INFO("stage " << stage << " " << precision);
      const auto plain = trainRanks(2, config(stage, precision, ""), 6);
      std::atomic<size_t> swapBytes{0};
      const auto nvme = trainRanks(2, config(stage, precision, offload("nvme", dir)), 6, {},
                                   [&](ds::runtime::Engine& e, int) {
                                     swapBytes += e.optimizerSwapBytes();
                                     CHECK(e.optimizerSwapEngine() != "");
                                   });
      CHECK(swapBytes > 0);  // the state really went through the swap files
      const auto cpu = trainRanks(2, config(stage, precision, offload("cpu", dir)), 6);
      for (int r = 0; r < 2; ++r) {
        CHECK(nvme[r].params == plain[r].params);
        CHECK(nvme[r].losses == plain[r].losses);
        CHECK(cpu[r].params == plain[r].params);
      }
      CHECK(filesIn(dir) == 0);  // swap files are unlinked from the start
    }
}

TEST_CASE("offload_optimizer: checkpoints move between offloaded and resident runs",
          "[offload]") {
  const std::string dir = ds::test::makeScratchDir("offload-ckpt");
  const std::string swap = dir + "/swap", ckpt = dir + "/ckpt", back = dir + "/back";
  std::filesystem::create_directories(swap);
  const std::string plainJson = config(2, "bf16", ""), nvmeJson = config(2, "bf16", offload("nvme", swap));
  const auto straight = trainRanks(2, plainJson, 6);
  // Offloaded for 3 steps, saved; resident from there.
  trainRanks(2, nvmeJson, 3, {}, [&](ds::runtime::Engine& e, int) { e.saveCheckpoint(ckpt, "s3"); });
  const auto resumed = trainRanks(2, plainJson, 3, [&](ds::runtime::Engine& e, int) {
    e.loadCheckpoint(ckpt, "s3");
  });
  // Resident for 3 steps, saved; offloaded from there.
  trainRanks(2, plainJson, 3, {}, [&](ds::runtime::Engine& e, int) { e.saveCheckpoint(back, "s3"); });
  const auto offloaded = trainRanks(2, nvmeJson, 3, [&](ds::runtime::Engine& e, int) {
    e.loadCheckpoint(back, "s3");
  });
  for (int r = 0; r < 2; ++r) {
    CHECK(resumed[r].params == straight[r].params);
    CHECK(offloaded[r].params == straight[r].params);
  }
  CHECK(filesIn(swap) == 0);
}

TEST_CASE("offload_optimizer: bad settings are refused by name", "[offload]") {
  const std::string dir = ds::test::makeScratchDir("offload-bad");
  auto parse = [](const std::string& json) { return ds::runtime::parseDeepSpeedConfig(json, 1, "c.json"); };
  CHECK_THROWS_WITH(parse(config(2, "fp32", R"("offload_optimizer": {"device": "nvme"})")),
                    Catch::Contains("offload_optimizer.nvme_path: required"));
  CHECK_THROWS_WITH(parse(config(0, "fp32", offload("cpu", dir))),
                    Catch::Contains("needs ZeRO stage 1, 2 or 3"));
  CHECK_THROWS_WITH(parse(config(2, "fp32", R"("offload_optimizer": {"device": "gpu"})")),
                    Catch::Contains("expected none, cpu or nvme"));
  CHECK_THROWS_WITH(
      parse(config(2, "fp32", R"("offload_optimizer": {"device": "cpu", "ratio": 0.5})")),
      Catch::Contains("partial offload"));
  CHECK_THROWS_WITH(trainRanks(1, config(1, "fp32", offload("nvme", dir + "/missing")), 1),
                    Catch::Contains("missing: not a directory"));
  CHECK_THROWS_WITH(ds::runtime::OptimizerSwapper::checkSpace(dir, uint64_t{1} << 62),
                    Catch::Contains("bytes of swap") && Catch::Contains("are free"));
  CHECK_THROWS_WITH(parse(config(1, "fp32", offload("nvme", dir)) .insert(1, R"("aio": {"use_gds": true}, )")),
                    Catch::Contains("aio.use_gds"));
}
