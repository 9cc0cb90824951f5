// offload_param nvme's knobs at stage 3, each observed through the engine's counters
// (Engine::parameterOffloadStats): buffer_count, buffer_size, pin_memory, and the stage-3 gather
// knobs that drive its reads (stage3_prefetch_bucket_size, stage3_max_live_parameters,
// stage3_max_reuse_distance, stage3_param_persistence_threshold). Every run also trains to bitwise
// the parameters of the same job without offload.
#include <sys/resource.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "test/engine_harness.h"
#include "test/libaio_dir.h"
#include "test/skip.h"

using ds::runtime::ZeroStage;
using ds::test::engineConfig;
using ds::test::trainRanks;

namespace {

// 16 x 512 x 512 x 512 x 4: four layers of 8704, 262656, 262656 and 2052 elements.
const std::vector<int> kWidths = {16, 512, 512, 512, 4};
constexpr int kSteps = 3;

struct Run {
  std::vector<float> params;
  ZeroStage::OffloadStats stats;
};

// Stage 3 fp32 with the stage-3 keys `zeroKeys` (the persistence threshold replaced when given),
// and offload_param nvme in `swap` with the keys `paramKeys` unless swap is empty.
Run train(int world, const std::string& swap, const std::string& zeroKeys,
          const std::string& paramKeys = "") {
  std::string json = engineConfig(3, "fp32");
  const std::string anchor = "\"stage3_param_persistence_threshold\": 0";
  std::string keys = zeroKeys.find("persistence") == std::string::npos ? anchor : "";
  if (!zeroKeys.empty()) keys += (keys.empty() ? "" : ", ") + zeroKeys;
  if (!swap.empty())
    keys += R"(, "offload_param": {"device": "nvme", "nvme_path": ")" + swap +
            R"(", "max_in_cpu": 0)" + (paramKeys.empty() ? "" : ", " + paramKeys) + "}";
  json.replace(json.find(anchor), anchor.size(), keys);
  Run run;
  const auto ranks = trainRanks(
      world, json, kSteps, {},
      [&](ds::runtime::Engine& e, int r) {
        if (r == 0) run.stats = e.parameterOffloadStats();
      },
      kWidths);
  run.params = ranks[0].params;
  return run;
}

std::string swapDir(const std::string& name) {
  const std::string dir = ds::test::libaioScratchDir(name);
  if (!dir.empty()) std::filesystem::create_directories(dir + "/swap");
  return dir.empty() ? dir : dir + "/swap";
}

}  // namespace

TEST_CASE(
    "offload_param: buffer_count buffers hold the layers, at most that many reads run at "
    "once, and enough of them read every layer once",
    "[offload]") {
  const std::string swap = swapDir("param-buffer-count");
  if (swap.empty()) return;
  const Run plain = train(1, "", "");
  uint64_t lastReads = ~uint64_t{0};
  for (int count : {1, 2, 4}) {
    INFO("buffer_count " << count);
    const Run run = train(1, swap, "", "\"buffer_count\": " + std::to_string(count));
    CHECK(run.params == plain.params);
    CHECK(run.stats.swappedLayers == std::vector<int>{0, 1, 2, 3});
    CHECK(run.stats.buffers == count);
    CHECK(run.stats.layersInBuffers.size() <= static_cast<size_t>(count));
    CHECK(run.stats.maxReadsInFlight >= 1);
    CHECK(run.stats.maxReadsInFlight <= count);
    CHECK(run.stats.reads <= lastReads);  // more buffers, no more reads
    lastReads = run.stats.reads;
  }
  // Four buffers hold all four layers: each is read once; the step updates them in place and
  // they keep the written shards, so later forwards, backwards and updates read nothing.
  CHECK(lastReads == 4);
}

TEST_CASE(
    "offload_param: a buffer holds buffer_size elements, or the largest layer shard when "
    "that is smaller",
    "[offload]") {
  const std::string swap = swapDir("param-buffer-size");
  if (swap.empty()) return;
  const Run plain = train(1, "", "");
  // The largest layer: 512 x 512 + 512 = 262656 fp32 elements, 1026 KiB in whole pages.
  const size_t largest = (262656 * 4 + 4095) / 4096 * 4096;
  for (const char* size : {"262656", "100000000"}) {
    INFO("buffer_size " << size);
    const Run run = train(1, swap, "", std::string("\"buffer_size\": ") + size);
    CHECK(run.params == plain.params);
    CHECK(run.stats.bufferBytes == largest);
  }
  // One element less than the largest shard is refused naming both values and the fix.
  CHECK_THROWS_WITH(train(1, swap, "", "\"buffer_size\": 262655"),
                    Catch::Contains("262656 elements") && Catch::Contains("buffer_size (262655)") &&
                        Catch::Contains("raise buffer_size to at least 262656"));
}

TEST_CASE("offload_param: pin_memory locks the buffers' pages", "[offload]") {
  // Four buffers of 1 MiB must fit the memlock allowance for the lock to be observable.
  struct rlimit limit {};
  getrlimit(RLIMIT_MEMLOCK, &limit);
  if (ds::test::skipUnless(
          limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur >= (size_t{8} << 20),
          "RLIMIT_MEMLOCK is " + std::to_string(limit.rlim_cur) +
              " bytes, under the 8 MiB the buffers need: pin_memory true cannot be observed"))
    return;
  const std::string swap = swapDir("param-pin-memory");
  if (swap.empty()) return;
  CHECK_FALSE(train(1, swap, "", "\"pin_memory\": false").stats.buffersLocked);
  CHECK(train(1, swap, "", "\"pin_memory\": true").stats.buffersLocked);
}

TEST_CASE(
    "offload_param: stage3_prefetch_bucket_size reads layers ahead of use, within "
    "stage3_max_live_parameters",
    "[offload]") {
  const std::string swap = swapDir("param-prefetch");
  if (swap.empty()) return;
  const Run plain = train(1, "", "");
  // Two buffers: the next layer is read while one is gathered.
  const Run none = train(1, swap, "\"stage3_prefetch_bucket_size\": 0", "\"buffer_count\": 2");
  const Run ahead =
      train(1, swap, "\"stage3_prefetch_bucket_size\": 1000000", "\"buffer_count\": 2");
  const Run bounded = train(1, swap,
                            "\"stage3_prefetch_bucket_size\": 1000000, "
                            "\"stage3_max_live_parameters\": 1",
                            "\"buffer_count\": 2");
  CHECK(none.stats.readsAhead == 0);
  CHECK(ahead.stats.readsAhead > 0);
  CHECK(bounded.stats.readsAhead == 0);  // no layer fits one live element
  for (const Run* run : {&none, &ahead, &bounded}) CHECK(run->params == plain.params);
  // The same bytes are read either way; ahead, most gathers find their layer already there.
  CHECK(ahead.stats.hits > none.stats.hits);
}

TEST_CASE(
    "offload_param: stage3_max_reuse_distance keeps gathered layers for the backward, and "
    "stage3_param_persistence_threshold keeps small layers gathered and out of the swap file",
    "[offload]") {
  const std::string swap = swapDir("param-reuse");
  if (swap.empty()) return;
  for (int world : {1, 2}) {
    INFO("world " << world);
    const Run plain = train(world, "", "");
    // Distance 0: only the last layer, whose backward comes right after its forward, is kept, so
    // the backward gathers the other three again (kSteps iterations, plus fullParameters'
    // gather-free read at the end).
    const Run near = train(world, swap, "\"stage3_max_reuse_distance\": 0");
    const Run far = train(world, swap, "\"stage3_max_reuse_distance\": 1000000000");
    CHECK(near.stats.gathers == kSteps * (4 + 3));
    CHECK(far.stats.gathers == kSteps * 4);
    CHECK(near.params == plain.params);
    CHECK(far.params == plain.params);
    // Layers of at most 10000 elements (the first and the last) persist: gathered once at start
    // and after each step, never swapped.
    const Run persistent = train(world, swap, "\"stage3_param_persistence_threshold\": 10000");
    CHECK(persistent.stats.swappedLayers == std::vector<int>{1, 2});
    CHECK(persistent.stats.gatheredLayers == std::vector<int>{0, 3});
    CHECK(persistent.stats.gathers == 2 + kSteps * (2 + 2));
    CHECK(persistent.params ==
          train(world, "", "\"stage3_param_persistence_threshold\": 10000").params);
  }
}

TEST_CASE(
    "offload_param: the optimizer step and checkpoints stream the shard sub-group by sub-group, "
    "never holding it whole, at fp32 (the shard is the master) and 16-bit (only its copy is "
    "written)",
    "[offload]") {
  const std::string swap = swapDir("param-streamed-step");
  if (swap.empty()) return;
  // Six layers of 256 x 256 + 256 = 65792 elements between the teacher's 16 inputs and 4
  // outputs; sub-groups of 50000 elements cut through them, so a layer is completed by the
  // second or third sub-group that covers it.
  const std::vector<int> widths = {16, 256, 256, 256, 256, 256, 256, 4};
  const std::string param = R"("offload_param": {"device": "nvme", "nvme_path": ")" + swap +
                            R"(", "max_in_cpu": 0, "buffer_count": 3})";
  for (const std::string precision : {"fp32", "bf16", "fp16"}) {
    for (int world : {1, 2}) {
      INFO(precision << ", world " << world);
      auto config = [&](const std::string& offload) {
        std::string json = engineConfig(3, precision);
        const std::string anchor = "\"stage3_param_persistence_threshold\": 0";
        json.replace(json.find(anchor), anchor.size(),
                     anchor + ", \"sub_group_size\": 50000" + (offload.empty() ? "" : ", " + offload));
        return json;
      };
      const auto plain = trainRanks(world, config(""), kSteps, {}, {}, widths);
      ZeroStage::OffloadStats stats, stepStats;
      // A checkpoint saved and loaded back streams the layers the same way.
      const std::string ckpt = swap + "/../ckpt-" + precision + "-" + std::to_string(world);
      const auto nvme = trainRanks(
          world, config(param), kSteps, {},
          [&](ds::runtime::Engine& e, int r) {
            if (r == 0) stepStats = e.parameterOffloadStats();
            e.saveCheckpoint(ckpt, "end");
            e.loadCheckpoint(ckpt, "end");
            if (r == 0) stats = e.parameterOffloadStats();
          },
          widths);
      std::filesystem::remove_all(ckpt);
      for (int r = 0; r < world; ++r) {
        CHECK(nvme[r].params == plain[r].params);
        CHECK(nvme[r].losses == plain[r].losses);
      }
      REQUIRE(stats.swappedLayers.size() == 7);
      // At most the two layers a sub-group straddles (the largest ones: 65792 elements each).
      const uint64_t bytes = precision == "fp32" ? 4 : 2;
      const uint64_t layerShard = (65792 + world - 1) / world * bytes;
      // The steps update each layer in its buffer: no layer's own arrays are used at all; a
      // checkpoint goes through them, two layers at most.
      CHECK(stepStats.maxHomeBytesIn == 0);
      CHECK(stats.maxHomeBytesIn > 0);
      CHECK(stats.maxHomeBytesIn <= 2 * layerShard);
    }
  }
}
