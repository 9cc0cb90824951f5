// The offload swappers on a real swap file: SlotSwapper (offload_optimizer) streams groups through
// its slots with any slot count and keeps every value across steps and checkpoints; ParamSwapper
// (offload_param) reads groups into its buffers ahead of use and keeps them there clean; both give
// their arrays' pages back.
// Both run on the libaio engine, in a directory that takes O_DIRECT (test/libaio_dir.h).
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <vector>

#include "common/error.h"
#include "runtime/offload/param_swapper.h"
#include "runtime/offload/slot_swapper.h"
#include "test/libaio_dir.h"
#include "test/scratch_dir.h"

using ds::runtime::AioConfig;
using ds::runtime::ParamSwapper;
using ds::runtime::SlotSwapper;
using ds::runtime::SwapFile;
using ds::runtime::SwapRegion;

namespace {

// Element e of array a of group g after `step` updates.
float expected(size_t g, size_t a, size_t e, int step) {
  return static_cast<float>(g * 100000 + a * 10000 + e % 9973) + 0.5f * step;
}

// Arrays of ragged, unaligned sizes (std::vector storage), several pages each.
std::vector<std::vector<std::vector<float>>> makeHomes(size_t groups) {
  const size_t sizes[] = {5003, 1021, 9000};
  std::vector<std::vector<std::vector<float>>> homes(groups);
  for (size_t g = 0; g < groups; ++g)
    for (size_t a = 0; a < 3; ++a) {
      homes[g].emplace_back(sizes[a] + g);
      for (size_t e = 0; e < homes[g][a].size(); ++e) homes[g][a][e] = expected(g, a, e, 0);
    }
  return homes;
}

std::vector<SwapRegion> regionsOf(std::vector<std::vector<float>>& arrays) {
  std::vector<SwapRegion> regions;
  for (auto& a : arrays) regions.push_back({a.data(), a.size() * sizeof(float)});
  return regions;
}

// An element in the middle of the array: on a page wholly inside it.
float middle(const std::vector<float>& a) { return a[a.size() / 2]; }

}  // namespace

TEST_CASE("SlotSwapper: groups stream through any number of slots and keep their values across "
          "steps and checkpoints",
          "[offload]") {
  const std::string dir = ds::test::libaioScratchDir("slot-swapper");
  if (dir.empty()) return;
  for (int slots : {1, 2, 3, 8}) {
    INFO(slots << " slot(s)");
    constexpr size_t kGroups = 5;
    auto homes = makeHomes(kGroups);
    uint64_t reserve = 0;
    for (auto& group : homes) {
      std::vector<size_t> bytes;
      for (const SwapRegion& r : regionsOf(group)) bytes.push_back(r.bytes);
      reserve += SlotSwapper::groupBytes(bytes);
    }
    SlotSwapper swapper(AioConfig{}, dir, 0, reserve, "offload_optimizer", "test", slots);
    CHECK(swapper.engineName() == std::string(ds::test::kLibaioEngineName));
    for (auto& group : homes) swapper.addGroup(regionsOf(group));
    CHECK(swapper.fileBytes() == reserve);
    CHECK(middle(homes[2][0]) == 0.0f);  // the homes' pages were given back
    CHECK(swapper.slotBytes() % 4096 == 0);

    for (int step = 1; step <= 3; ++step) {
      for (size_t g = 0; g < kGroups; ++g) {
        const std::vector<void*>& at = swapper.acquire(g);
        REQUIRE(at.size() == 3);
        for (size_t a = 0; a < 3; ++a) {
          CHECK(reinterpret_cast<uintptr_t>(at[a]) % 64 == 0);
          auto* values = static_cast<float*>(at[a]);
          const size_t n = homes[g][a].size();
          size_t wrong = 0;
          for (size_t e = 0; e < n; ++e) wrong += values[e] != expected(g, a, e, step - 1);
          CHECK(wrong == 0);
          for (size_t e = 0; e < n; ++e) values[e] += 0.5f;
        }
        // Arrays of a group start on different cache sets.
        CHECK(reinterpret_cast<uintptr_t>(at[0]) % 4096 != reinterpret_cast<uintptr_t>(at[1]) % 4096);
        swapper.release(g);
      }
      swapper.endStep();
    }

    // A checkpoint: everything into the homes, a load rewrites them, out again.
    swapper.swapInAll();
    size_t wrong = 0;
    for (size_t g = 0; g < kGroups; ++g)
      for (size_t a = 0; a < 3; ++a)
        for (size_t e = 0; e < homes[g][a].size(); ++e) wrong += homes[g][a][e] != expected(g, a, e, 3);
    CHECK(wrong == 0);
    for (auto& group : homes)
      for (auto& array : group) std::fill(array.begin(), array.end(), -1.0f);
    swapper.swapOutAll();
    CHECK(middle(homes[4][2]) == 0.0f);
    for (size_t g = 0; g < kGroups; ++g) {
      const std::vector<void*>& at = swapper.acquire(g);
      for (size_t a = 0; a < 3; ++a) {
        const auto* values = static_cast<const float*>(at[a]);
        CHECK(std::all_of(values, values + homes[g][a].size(), [](float v) { return v == -1.0f; }));
      }
      swapper.release(g);
    }
    swapper.endStep();
  }
  CHECK(std::filesystem::is_empty(dir));  // the swap files were unlinked from the start
}

TEST_CASE("SlotSwapper and SwapFile: bad settings are refused by name", "[offload]") {
  const std::string dir = ds::test::makeScratchDir("slot-swapper-bad");
  CHECK_THROWS_WITH(SlotSwapper(AioConfig{}, dir, 0, 4096, "offload_optimizer", "t", 0),
                    Catch::Contains("offload_optimizer.buffer_count"));
  CHECK_THROWS_WITH(SlotSwapper(AioConfig{}, dir + "/none", 0, 4096, "offload_optimizer", "t", 2),
                    Catch::Contains("offload_optimizer.nvme_path") && Catch::Contains("not a directory"));
  SwapFile file(AioConfig{}, dir, 0, 8192, "offload_param", "t");
  CHECK(file.allocate(4096) == 0);
  CHECK(file.allocate(4096) == 4096);
  CHECK_THROWS_WITH(file.allocate(4096), Catch::Contains("outgrew the 8192 bytes reserved"));
}

TEST_CASE("ParamSwapper: groups are read into buffers ahead of use, kept there clean, and "
          "written back from their homes",
          "[offload]") {
  const std::string dir = ds::test::libaioScratchDir("param-swapper");
  if (dir.empty()) return;
  // Four ragged groups (one array each, as a layer's shard), three buffers.
  auto homes = makeHomes(4);
  uint64_t reserve = 0;
  size_t largest = 0;
  for (auto& group : homes) {
    reserve += ParamSwapper::fileBytesFor(group[2].size() * sizeof(float));
    largest = std::max(largest, group[2].size() * sizeof(float));
  }
  ParamSwapper swapper(AioConfig{}, dir, 0, reserve, 3, largest, false);
  CHECK(swapper.engineName() == std::string(ds::test::kLibaioEngineName));
  for (auto& group : homes)
    swapper.addGroup({group[2].data(), group[2].size() * sizeof(float)});
  CHECK(swapper.groupCount() == 4);
  CHECK(middle(homes[1][2]) == 0.0f);  // given back
  auto valueAt = [&](const char* at, size_t g) {
    float v;
    const size_t e = homes[g][2].size() / 2;
    std::memcpy(&v, at + e * sizeof(float), sizeof v);
    return v == expected(g, 2, e, 0);
  };
  // Read ahead into free buffers; a buffer holding a group read ahead and not used yet is never
  // taken by another read ahead.
  CHECK(swapper.prefetch(0));
  CHECK(swapper.prefetch(1));
  CHECK(swapper.prefetch(2));
  CHECK_FALSE(swapper.prefetch(3));
  CHECK(swapper.counters().readsAhead == 3);
  CHECK(valueAt(swapper.acquire(1), 1));
  swapper.release(1);
  CHECK(swapper.counters().hits == 1);
  // Group 1 was used: a read ahead may take its buffer now.
  CHECK(swapper.prefetch(3));
  std::vector<size_t> in = swapper.slotGroups();
  std::sort(in.begin(), in.end());
  CHECK(in == std::vector<size_t>{0, 2, 3});
  // An acquire always succeeds: group 1 again takes the least recently read buffer.
  CHECK(valueAt(swapper.acquire(1), 1));
  swapper.release(1);
  CHECK(swapper.counters().reads == 5);
  CHECK(swapper.counters().maxReadsInFlight >= 1);
  CHECK(swapper.counters().maxReadsInFlight <= 3);
  CHECK_FALSE(swapper.slotsLocked());  // pin_memory false
  // Every home rewritten (the step), written out: the buffers keep the first groups for the next
  // forward, which reads nothing for them.
  swapper.swapInAll();
  CHECK(middle(homes[3][2]) == expected(3, 2, homes[3][2].size() / 2, 0));
  for (auto& group : homes) std::fill(group[2].begin(), group[2].end(), 3.0f);
  swapper.markHomesWritten();
  swapper.swapOutAll();
  CHECK(middle(homes[0][2]) == 0.0f);
  CHECK(swapper.counters().bytesWritten >= 4 * 5000 * sizeof(float));
  in = swapper.slotGroups();
  std::sort(in.begin(), in.end());
  CHECK(in == std::vector<size_t>{0, 1, 2});
  const uint64_t reads = swapper.counters().reads;
  float first;
  std::memcpy(&first, swapper.acquire(0), sizeof first);
  swapper.release(0);
  CHECK(first == 3.0f);
  CHECK(swapper.counters().reads == reads);
  swapper.swapInAll();
  for (auto& group : homes)
    CHECK(std::all_of(group[2].begin(), group[2].end(), [](float v) { return v == 3.0f; }));
  swapper.dropHomes();
  CHECK(middle(homes[2][2]) == 0.0f);
}

TEST_CASE("ParamSwapper: pin_memory locks the buffers where the memlock allowance permits",
          "[offload]") {
  const std::string dir = ds::test::libaioScratchDir("param-swapper-pin");
  if (dir.empty()) return;
  std::vector<float> home(3000, 1.0f);
  ParamSwapper swapper(AioConfig{}, dir, 0, 16384, 2, home.size() * sizeof(float), true);
  swapper.addGroup({home.data(), home.size() * sizeof(float)});
  struct rlimit limit {};
  getrlimit(RLIMIT_MEMLOCK, &limit);
  if (limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur >= (size_t{1} << 20))
    CHECK(swapper.slotsLocked());
}

namespace {

// The descriptor of this process's (unlinked) swap file whose name holds `stem`: what a user who
// overwrites it through /proc/PID/fd/N writes to.
int openSwapFile(const std::string& stem) {
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    const std::string target = std::filesystem::read_symlink(entry.path(), ec).string();
    if (!ec && target.find("/.ds-" + stem + "-swap-") != std::string::npos)
      return ::open(entry.path().c_str(), O_WRONLY);
  }
  return -1;
}

}  // namespace

TEST_CASE("SwapFile: a region changed under the job is refused on reading, naming the file and "
          "offset",
          "[offload]") {
  const std::string dir = ds::test::libaioScratchDir("swap-checksum");
  if (dir.empty()) return;
  constexpr size_t kMiB = size_t{1} << 20;
  SwapFile file(AioConfig{}, dir, 0, 4 * kMiB, "offload_optimizer", "crc");
  ds::runtime::AlignedBuffer out(3 * kMiB, false), in(3 * kMiB, false);
  auto* bytes = static_cast<unsigned char*>(out.data());
  for (size_t i = 0; i < 3 * kMiB; ++i) bytes[i] = static_cast<unsigned char>(i * 7 + 3);
  const uint64_t first = file.allocate(3 * kMiB), second = file.allocate(kMiB);
  file.write(out.data(), 3 * kMiB, first);
  file.write(out.data(), kMiB, second);
  file.read(in.data(), 3 * kMiB, first);  // what was written reads back
  CHECK(std::memcmp(in.data(), out.data(), 3 * kMiB) == 0);

  // One byte in the second MiB of the first region, changed through the file's descriptor.
  const int fd = openSwapFile("crc");
  REQUIRE(fd >= 0);
  const unsigned char changed = bytes[kMiB + 12345] ^ 0x01;
  REQUIRE(::pwrite(fd, &changed, 1, static_cast<off_t>(first + kMiB + 12345)) == 1);
  ::close(fd);
  CHECK_THROWS_WITH(
      file.read(in.data(), 3 * kMiB, first),
      Catch::Contains("offload_optimizer swap file " + dir + "/.ds-crc-swap-") &&
          Catch::Contains("(unlinked): the 1048576 bytes at offset 1048576 read back with "
                          "checksum crc32c:") &&
          Catch::Contains("the file was changed under the job or the device returned other data"));
  file.read(in.data(), kMiB, second);  // the other region is intact
  // Rewritten, the region is good again.
  file.write(out.data(), 3 * kMiB, first);
  file.read(in.data(), 3 * kMiB, first);

  // With checksums off (what bench_offload compares against), nothing is verified.
  ds::runtime::setSwapChecksums(false);
  SwapFile unchecked(AioConfig{}, dir, 1, kMiB, "offload_param", "nocrc");
  ds::runtime::setSwapChecksums(true);
  unchecked.write(out.data(), kMiB, unchecked.allocate(kMiB));
  const int other = openSwapFile("nocrc");
  REQUIRE(other >= 0);
  REQUIRE(::pwrite(other, &changed, 1, 100) == 1);
  ::close(other);
  CHECK_NOTHROW(unchecked.read(in.data(), kMiB, 0));
}
