// Checkpoints: bit-exact resume for every stage and precision, loading at another world size and
// stage, damaged files named by the loader, a crashed save that leaves the last good checkpoint
// loadable, and a save that runs out of disk space that leaves nothing behind.
#include <sys/mount.h>
#include <sys/statvfs.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "engine_harness.h"
#include "test/scratch_dir.h"
#include "test/skip.h"

using namespace ds::test;
namespace fs = std::filesystem;

namespace {

// A scratch directory (test/scratch_dir.h) that is also emptied when the case's scope ends, so
// the many checkpoints of the stage x dtype loops do not pile up until the process exits.
struct TempDir {
  fs::path path = makeScratchDir("ckpt");
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
};

auto saver(const fs::path& dir, const std::string& tag) {
  return [=](ds::runtime::Engine& e, int) { e.saveCheckpoint(dir.string(), tag); };
}
auto loader(const fs::path& dir, const std::string& tag = "") {
  return [=](ds::runtime::Engine& e, int) { e.loadCheckpoint(dir.string(), tag); };
}

}  // namespace

TEST_CASE("checkpoint: N steps, save, load, N more equals 2N straight, bit for bit") {
  for (int stage = 0; stage <= 3; ++stage)
    for (const char* precision : {"fp32", "bf16", "fp16"}) {
      INFO("stage " << stage << " " << precision);
      TempDir dir;
      const std::string json =
          engineConfig(stage, precision,
                       R"("scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": 5}})");
      const auto straight = trainRanks(2, json, 6);
      trainRanks(2, json, 3, {}, saver(dir.path, "step3"));
      CHECK(fs::exists(dir.path / "step3" / "manifest.json"));
      // Loaded with the optimizer in other sub-groups: the state is re-cut the same way.
      std::string regrouped = json;
      const std::string zero = R"("zero_optimization": {)";
      regrouped.replace(regrouped.find(zero), zero.size(),
                        R"("zero_optimization": {"sub_group_size": 700, )");
      const auto resumed = trainRanks(2, regrouped, 3, loader(dir.path));
      for (int r = 0; r < 2; ++r) {
        CHECK(resumed[r].params == straight[r].params);
        CHECK(resumed[r].lr == straight[r].lr);
        CHECK(resumed[r].lossScale == straight[r].lossScale);
        CHECK(std::vector<float>(straight[r].losses.begin() + 3, straight[r].losses.end()) ==
              resumed[r].losses);
      }
    }
}

TEST_CASE("checkpoint: saved at 4 ranks, loads at 2 and 3 (and another stage) unchanged") {
  for (int stage : {1, 2, 3}) {
    INFO("saved at stage " << stage);
    TempDir dir;
    const auto saved = trainRanks(4, engineConfig(stage, "bf16"), 3, {}, saver(dir.path, "s"));
    const auto continued4 = trainRanks(4, engineConfig(stage, "bf16"), 3, loader(dir.path));
    for (int world : {2, 3})
      for (int loadStage : {stage, stage == 3 ? 1 : 3}) {
        INFO("loaded at world " << world << " stage " << loadStage);
        std::vector<std::vector<float>> loaded(world);
        const auto runs = trainRanks(world, engineConfig(loadStage, "bf16"), 3,
                                     [&](ds::runtime::Engine& e, int r) {
                                       e.loadCheckpoint(dir.path.string());
                                       loaded[r] = e.fullParameters();
                                     });
        for (int r = 0; r < world; ++r) CHECK(loaded[r] == saved[0].params);
        // Same global batches afterwards: equal up to the order ranks are summed in.
        for (size_t i = 0; i < runs[0].params.size(); ++i)
          CHECK(runs[0].params[i] == Approx(continued4[0].params[i]).margin(2e-2));
        CHECK(runs[0].params == runs[world - 1].params);
      }
  }
}

TEST_CASE("checkpoint: a truncated or corrupted shard is named, a crashed save loses nothing") {
  TempDir dir;
  const std::string json = engineConfig(2, "fp32");
  trainRanks(2, json, 2, {}, saver(dir.path, "good"));
  const fs::path shard = dir.path / "good" / "shard_00001.bin";
  const auto pristine = fs::file_size(shard);
  {
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x5a');
  }
  CHECK_THROWS_WITH(trainRanks(2, json, 0, loader(dir.path)),
                    Catch::Contains("shard_00001.bin: checkpoint file is corrupted"));
  fs::resize_file(shard, pristine - 8);
  CHECK_THROWS_WITH(trainRanks(2, json, 0, loader(dir.path)), Catch::Contains("(truncated)"));

  // A save that died half-way: its staging directory is left behind, `latest` untouched.
  TempDir second;
  const auto saved = trainRanks(2, json, 2, {}, saver(second.path, "a"));
  fs::create_directories(second.path / ".tmp-b");
  std::ofstream(second.path / ".tmp-b" / "shard_00000.bin") << "partial";
  std::vector<float> loaded;
  trainRanks(2, json, 0, [&](ds::runtime::Engine& e, int r) {
    CHECK(e.loadCheckpoint(second.path.string()) == "a");
    if (r == 0) loaded = e.fullParameters();
  });
  CHECK(loaded == saved[0].params);
  // Saving over an existing tag swaps the new one in; the stale staging of "b" is replaced.
  trainRanks(2, json, 1, loader(second.path), saver(second.path, "b"));
  trainRanks(2, json, 1, loader(second.path, "a"), saver(second.path, "a"));
  std::ifstream latest(second.path / "latest");
  std::string tag;
  latest >> tag;
  CHECK(tag == "a");
  CHECK_FALSE(fs::exists(second.path / ".tmp-b"));
  CHECK_FALSE(fs::exists(second.path / ".tmp-a"));

  CHECK_THROWS_WITH(trainRanks(2, json, 0, loader(dir.path / "nowhere")),
                    Catch::Contains("latest: cannot read"));
  CHECK_THROWS_WITH(trainRanks(1, json, 0, saver(dir.path, "../x")),
                    Catch::Contains("expected a plain name"));
  // A save that cannot even create its directory fails on every rank at once (rank 1 would
  // otherwise wait in the next collective until its timeout).
  std::ofstream(dir.path / "blocker") << "a file where a directory should be";
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::string> messages(2);
  trainRanks(2, json, 0, [&](ds::runtime::Engine& e, int r) {
    try {
      e.saveCheckpoint((dir.path / "blocker" / "ckpt").string(), "t");
    } catch (const ds::Error& error) {
      messages[r] = error.what();
    }
  });
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  for (const auto& message : messages)
    CHECK_THAT(message, Catch::Contains("cannot create checkpoint directory"));
}

TEST_CASE("checkpoint: a save that runs out of space leaves no staging directory and frees it") {
  TempDir dir;
  const fs::path small = dir.path / "small";
  fs::create_directories(small);
  if (skipUnless(mount("tmpfs", small.c_str(), "tmpfs", 0, "size=16m") == 0,
                 "cannot mount a tmpfs to fill (needs root or CAP_SYS_ADMIN)"))
    return;
  struct Unmount {
    fs::path path;
    ~Unmount() { umount2(path.c_str(), MNT_DETACH); }
  } unmount{small};
  const std::string json = engineConfig(2, "fp32");
  // Room for one checkpoint and half of another: the second save runs out part-way.
  trainRanks(2, json, 1, {}, saver(dir.path / "probe", "p"));
  uintmax_t pages = 0;
  for (const auto& entry : fs::recursive_directory_iterator(dir.path / "probe"))
    if (entry.is_regular_file()) pages += (entry.file_size() + 4095) / 4096;
  const std::string size = "size=" + std::to_string(pages * 3 / 2 * 4096);
  REQUIRE(mount("tmpfs", small.c_str(), "tmpfs", MS_REMOUNT, size.c_str()) == 0);
  const auto saved = trainRanks(2, json, 1, {}, saver(small, "first"));
  auto freeBytes = [&] {
    struct statvfs info {};
    REQUIRE(statvfs(small.c_str(), &info) == 0);
    return static_cast<uintmax_t>(info.f_bavail) * info.f_frsize;
  };
  const uintmax_t before = freeBytes();

  std::vector<std::string> messages(2);
  trainRanks(2, json, 1, {}, [&](ds::runtime::Engine& e, int r) {
    try {
      e.saveCheckpoint(small.string(), "second");
    } catch (const ds::Error& error) {
      messages[r] = error.what();
    }
  });
  for (const auto& message : messages) CHECK_THAT(message, Catch::Contains("No space left"));
  CHECK_FALSE(fs::exists(small / ".tmp-second"));
  CHECK_FALSE(fs::exists(small / "second"));
  CHECK(freeBytes() == before);
  // The previous checkpoint is untouched and still the latest.
  std::vector<float> loaded;
  trainRanks(2, json, 0, [&](ds::runtime::Engine& e, int r) {
    CHECK(e.loadCheckpoint(small.string()) == "first");
    if (r == 0) loaded = e.fullParameters();
  });
  CHECK(loaded == saved[0].params);
}
