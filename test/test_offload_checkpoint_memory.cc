// offload_optimizer nvme: a checkpoint save and load stream the optimizer's sub-groups between the
// swap slots and the shard file, group by group, so the process's peak RSS during either stays
// at the steady state plus at most one sub-group, far below the states' size (which bringing
// every group in, as checkpoints did before, would add). The peak is measured by resetting the
// kernel's high-water mark (/proc/self/clear_refs) before each and reading VmHWM after.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>

#include "test/engine_harness.h"
#include "test/libaio_dir.h"
#include "test/skip.h"

namespace {

// kB of a /proc/self/status line ("VmRSS:", "VmHWM:").
size_t statusKiB(const std::string& key) {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind(key, 0) == 0) return std::stoul(line.substr(key.size()));
  return 0;
}

bool resetPeakRss() { return static_cast<bool>(std::ofstream("/proc/self/clear_refs") << "5"); }

}  // namespace

TEST_CASE("offload_optimizer: save and load hold one sub-group beyond the steady state",
          "[offload]") {
  if (ds::test::skipUnless(resetPeakRss(), "/proc/self/clear_refs cannot reset the peak RSS here"))
    return;
  const std::string dir = ds::test::libaioScratchDir("offload-ckpt-rss");
  if (dir.empty()) return;
  const std::string swap = dir + "/swap", ckpt = dir + "/ckpt";
  std::filesystem::create_directories(swap);
  // 8.4 M parameters: Adam's two states are 67 MB on NVMe, in groups of 1 M elements (8 MB).
  constexpr size_t kGroup = size_t{1} << 20;
  std::string json = ds::test::engineConfig(2, "fp32");
  const std::string anchor = "\"stage3_param_persistence_threshold\": 0";
  json.replace(json.find(anchor), anchor.size(),
               anchor + ", \"sub_group_size\": " + std::to_string(kGroup) +
                   R"(, "offload_optimizer": {"device": "nvme", "nvme_path": ")" + swap +
                   R"(", "buffer_count": 2})");
  const std::vector<int> widths = {16, 2048, 2048, 2048, 4};
  size_t saveGrowth = 0, loadGrowth = 0, stateBytes = 0;
  bool measured = true;
  ds::test::trainRanks(
      1, json, 1, {},
      [&](ds::runtime::Engine& e, int) {
        stateBytes = e.optimizerSwapBytes();
        measured = resetPeakRss();
        size_t before = statusKiB("VmRSS:");
        e.saveCheckpoint(ckpt, "s1");
        saveGrowth = (statusKiB("VmHWM:") - before) * 1024;
        measured = measured && resetPeakRss();
        before = statusKiB("VmRSS:");
        e.loadCheckpoint(ckpt, "s1");
        loadGrowth = (statusKiB("VmHWM:") - before) * 1024;
      },
      widths);
  REQUIRE(measured);
  const size_t groupBytes = 2 * kGroup * sizeof(float);  // Adam's m and v of one group
  INFO("states " << stateBytes / 1048576.0 << " MiB on NVMe; peak RSS above the steady state: save "
                 << saveGrowth / 1048576.0 << " MiB, load " << loadGrowth / 1048576.0
                 << " MiB (one group: " << groupBytes / 1048576.0 << " MiB)");
  REQUIRE(stateBytes > 6 * groupBytes);
  CHECK(saveGrowth <= groupBytes + (size_t{4} << 20));
  CHECK(loadGrowth <= groupBytes + (size_t{4} << 20));
}
