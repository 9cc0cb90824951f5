// offload_optimizer: training with the optimizer state on NVMe (a swap file per rank) gives
// bitwise the parameters of training without it, at every stage that allows it, in fp32 and
// bf16, with several sub-groups streamed; checkpoints move between offloaded and resident runs;
// no swap file is ever left behind; bad settings are refused by name. The "cpu" device of either
// offload is not trained here: in this CPU-only runtime it is the no-offload path itself (only
// Nvme changes what the engine and stage 3 do), so comparing it with no offload could not fail;
// its config handling is tested below. The swap files live in a directory that takes O_DIRECT,
// so that they go through the libaio engine (test/libaio_dir.h).
#include <atomic>
#include <catch2/catch.hpp>
#include <filesystem>

#include "common/error.h"
#include "runtime/offload/swap_file.h"
#include "test/engine_harness.h"
#include "test/libaio_dir.h"
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

TEST_CASE("offload_optimizer: nvme trains to bitwise the parameters of no offload", "[offload]") {
  const std::string dir = ds::test::libaioScratchDir("offload-nvme");
  if (dir.empty()) return;
  for (int stage : {1, 2, 3})
    for (const std::string precision : {"fp32", "bf16"}) {
      INFO("stage " << stage << " " << precision);
      const auto plain = trainRanks(2, config(stage, precision, ""), 6);
      std::atomic<size_t> swapBytes{0};
      const auto nvme = trainRanks(2, config(stage, precision, offload("nvme", dir)), 6, {},
                                   [&](ds::runtime::Engine& e, int) {
                                     swapBytes += e.optimizerSwapBytes();
                                     CHECK(e.optimizerSwapEngine() == ds::test::kLibaioEngineName);
                                   });
      CHECK(swapBytes > 0);  // the state really went through the swap files
      for (int r = 0; r < 2; ++r) {
        CHECK(nvme[r].params == plain[r].params);
        CHECK(nvme[r].losses == plain[r].losses);
      }
      CHECK(filesIn(dir) == 0);  // swap files are unlinked from the start
    }
}

TEST_CASE("offload_optimizer: nvme with any buffer_count, and with optimizers that do not fuse "
          "the 16-bit copy, trains to bitwise the parameters of no offload",
          "[offload]") {
  const std::string dir = ds::test::libaioScratchDir("offload-slots");
  if (dir.empty()) return;
  const std::string adam = R"({"type": "AdamW", "params": {"lr": 0.01, "weight_decay": 0.01}})";
  for (const std::string& optimizer :
       {adam, std::string(R"({"type": "Lamb", "params": {"lr": 0.01}})"),
        std::string(R"({"type": "SGD", "params": {"lr": 0.01, "momentum": 0.9}})")})
    for (int slots : {1, 2, 5}) {
      if (optimizer != adam && slots != 2) continue;
      INFO(optimizer << ", buffer_count " << slots);
      auto withOptimizer = [&](std::string json) {
        return json.replace(json.find(adam), adam.size(), optimizer);
      };
      const std::string nvme = R"("offload_optimizer": {"device": "nvme", "buffer_count": )" +
                               std::to_string(slots) + R"(, "nvme_path": ")" + dir + R"("})";
      const auto plain = trainRanks(2, withOptimizer(config(2, "bf16", "")), 5);
      const auto offloaded = trainRanks(2, withOptimizer(config(2, "bf16", nvme)), 5);
      for (int r = 0; r < 2; ++r) {
        CHECK(offloaded[r].params == plain[r].params);
        CHECK(offloaded[r].losses == plain[r].losses);
      }
    }
}

TEST_CASE("offload_optimizer: checkpoints move between offloaded and resident runs",
          "[offload]") {
  const std::string dir = ds::test::libaioScratchDir("offload-ckpt");
  if (dir.empty()) return;
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

TEST_CASE("offload_param: nvme at stage 3 trains to bitwise the parameters of no offload, alone "
          "and with offload_optimizer, and checkpoints move between the two",
          "[offload]") {
  const std::string dir = ds::test::libaioScratchDir("offload-param");
  if (dir.empty()) return;
  const std::string swap = dir + "/swap", ckpt = dir + "/ckpt";
  std::filesystem::create_directories(swap);
  // Layers of 16 x 512 ... 512 x 512: every rank's shard of the middle ones spans whole pages.
  const std::vector<int> widths = {16, 512, 512, 4};
  const std::string param = R"("offload_param": {"device": "nvme", "nvme_path": ")" + swap +
                            R"(", "max_in_cpu": 0})";
  for (const std::string precision : {"fp32", "bf16"}) {
    INFO(precision);
    const auto plain = trainRanks(2, config(3, precision, ""), 4, {}, {}, widths);
    std::atomic<size_t> paramBytes{0};
    const auto nvme = trainRanks(2, config(3, precision, param), 4, {},
                                 [&](ds::runtime::Engine& e, int) {
                                   paramBytes += e.parameterSwapBytes();
                                 },
                                 widths);
    CHECK(paramBytes > 0);  // the shards really went through the swap files
    const auto both = trainRanks(2, config(3, precision, param + ", " + offload("nvme", swap)), 4,
                                 {}, {}, widths);
    for (int r = 0; r < 2; ++r) {
      CHECK(nvme[r].params == plain[r].params);
      CHECK(nvme[r].losses == plain[r].losses);
      CHECK(both[r].params == plain[r].params);
    }
    CHECK(filesIn(swap) == 0);
  }
  // Saved with parameters offloaded after 2 steps, resumed offloaded or resident: the straight
  // run's end. The checkpoint streams the layers with the sub-groups (fp32: read for the save,
  // they are the master; config's 1500-element sub-groups cut every layer into many).
  for (const std::string precision : {"fp32", "bf16"}) {
    INFO(precision << " checkpoint");
    const auto straight = trainRanks(2, config(3, precision, ""), 4, {}, {}, widths);
    trainRanks(2, config(3, precision, param), 2, {},
               [&](ds::runtime::Engine& e, int) { e.saveCheckpoint(ckpt, "s2"); }, widths);
    const auto resumed = trainRanks(
        2, config(3, precision, param), 2,
        [&](ds::runtime::Engine& e, int) { e.loadCheckpoint(ckpt, "s2"); }, {}, widths);
    const auto resumedResident = trainRanks(
        2, config(3, precision, ""), 2,
        [&](ds::runtime::Engine& e, int) { e.loadCheckpoint(ckpt, "s2"); }, {}, widths);
    for (int r = 0; r < 2; ++r) {
      CHECK(resumed[r].params == straight[r].params);
      CHECK(resumedResident[r].params == straight[r].params);
    }
    std::filesystem::remove_all(ckpt);
  }
}

TEST_CASE("offload_param: bad settings are refused by name", "[offload]") {
  const std::string dir = ds::test::makeScratchDir("offload-param-bad");
  auto parse = [](const std::string& json) { return ds::runtime::parseDeepSpeedConfig(json, 1, "c.json"); };
  CHECK_THROWS_WITH(parse(config(2, "fp32", R"("offload_param": {"device": "cpu"})")),
                    Catch::Contains("offload_param: parameter offload needs ZeRO stage 3"));
  CHECK_THROWS_WITH(parse(config(3, "fp32", R"("offload_param": {"device": "nvme"})")),
                    Catch::Contains("offload_param.nvme_path: required"));
  CHECK_THROWS_WITH(parse(config(3, "fp32", R"("offload_param": {"device": "disk"})")),
                    Catch::Contains("offload_param.device: expected none, cpu or nvme"));
  CHECK_THROWS_WITH(
      trainRanks(1, config(3, "fp32", R"("offload_param": {"device": "nvme", "nvme_path": ")" +
                                          dir + R"(", "max_in_cpu": 0, "buffer_size": 100})"),
                 1),
      Catch::Contains("offload_param.buffer_size: layer") && Catch::Contains("raise buffer_size"));
  CHECK_THROWS_WITH(
      trainRanks(1, config(3, "fp32", R"("offload_param": {"device": "nvme", "nvme_path": ")" +
                                          dir + R"(/missing"})"),
                 1),
      Catch::Contains("offload_param.nvme_path") && Catch::Contains("not a directory"));
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
  CHECK_THROWS_WITH(ds::runtime::SwapFile::checkSpace(dir, uint64_t{1} << 62, "offload_optimizer"),
                    Catch::Contains("bytes of swap") && Catch::Contains("are free"));
  CHECK_THROWS_WITH(parse(config(1, "fp32", offload("nvme", dir)) .insert(1, R"("aio": {"use_gds": true}, )")),
                    Catch::Contains("aio.use_gds"));
}

TEST_CASE("offload: DeepSpeed's deprecated cpu_offload and cpu_offload_param mean the cpu device",
          "[offload]") {
  const auto c = ds::runtime::parseDeepSpeedConfig(
      config(3, "fp32", R"("cpu_offload": true, "cpu_offload_param": true)"), 1, "c.json");
  CHECK(c.zero.offloadOptimizer.device == ds::runtime::OffloadDevice::Cpu);
  CHECK(c.zero.offloadParam.device == ds::runtime::OffloadDevice::Cpu);
  const auto off = ds::runtime::parseDeepSpeedConfig(config(3, "fp32", R"("cpu_offload": false)"),
                                                     1, "c.json");
  CHECK(off.zero.offloadOptimizer.device == ds::runtime::OffloadDevice::None);
}
