// The offload I/O engines: libaio (O_DIRECT) and pread/pwrite give back exactly what was written
// for every combination of the aio block's knobs; every error names the file, offset and length;
// the config's rules. The libaio cases run in a directory that takes
// O_DIRECT (test/scratch_dir.h) and are skipped by name, never passed, where none does.
#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <random>
#include <thread>
#include <vector>

#include "common/error.h"
#include "runtime/offload/aio_engine.h"
#include "test/libaio_dir.h"
#include "test/scratch_dir.h"

using ds::runtime::AioConfig;
using ds::runtime::AioEngine;
using ds::runtime::AlignedBuffer;

namespace {

void fillRandom(AlignedBuffer& b, uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto* words = static_cast<uint64_t*>(b.data());
  for (size_t i = 0; i < b.size() / 8; ++i) words[i] = rng();
}

void checkEveryKnob(bool libaio, const std::string& dir) {
  const size_t bytes = 9 * (1 << 20) + 3 * 4096;  // not a whole number of blocks
  AlignedBuffer out(bytes), in(bytes);
  fillRandom(out, 7);
  int cases = 0;
  for (int64_t threads : {1, 3})
    for (int64_t depth : {1, 4})
      for (bool single : {false, true})
        for (bool overlap : {true, false}) {
          AioConfig c;
          c.blockSize = 1 << 20;
          c.queueDepth = depth;
          c.threadCount = threads;
          c.singleSubmit = single;
          c.overlapEvents = overlap;
          auto engine = libaio ? ds::runtime::makeLibaioEngine(c) : ds::runtime::makePlainEngine(c);
          INFO(engine->name() << " threads " << threads << " depth " << depth << " single "
                              << single << " overlap " << overlap);
          const std::string path = dir + "/swap-" + std::to_string(cases++);
          engine->write(path, out.data(), bytes, 8192);
          std::memset(in.data(), 0, bytes);
          engine->read(path, in.data(), bytes, 8192);
          REQUIRE(std::memcmp(in.data(), out.data(), bytes) == 0);
          CHECK(std::filesystem::file_size(path) == bytes + 8192);
        }
  CHECK(cases == 16);
}

void checkErrors(bool libaio, const std::string& dir) {
  AlignedBuffer buffer(1 << 20);
  AioConfig c;
  auto engine = libaio ? ds::runtime::makeLibaioEngine(c) : ds::runtime::makePlainEngine(c);
  const std::string path = dir + std::string("/short-") + (libaio ? "a" : "p");
  engine->write(path, buffer.data(), 64 << 10, 0);  // a 64 KiB file
  CHECK_THROWS_WITH(engine->read(path, buffer.data(), 1 << 20, 0),
                    Catch::Contains(path) && Catch::Contains("short read") &&
                        Catch::Contains("the file ends at 65536"));
  if (libaio)
    CHECK_THROWS_WITH(engine->read(path, static_cast<char*>(buffer.data()) + 512, 4096, 0),
                      Catch::Contains("multiples of 4096"));
}

}  // namespace

TEST_CASE("aio engines: libaio: what is written is read back, for every knob", "[aio]") {
  const std::string dir = ds::test::libaioScratchDir("aio-libaio");
  if (dir.empty()) return;
  checkEveryKnob(true, dir);
}

TEST_CASE("aio engines: pread/pwrite: what is written is read back, for every knob", "[aio]") {
  checkEveryKnob(false, ds::test::makeScratchDir("aio-plain"));
}

TEST_CASE("aio engines: concurrent requests on one engine share its helper threads", "[aio]") {
  // As the slot swapper's I/O threads do: several requests at once, each wanting thread_count - 1
  // helpers of the engine's own; none may wait for another's parts, and every one completes.
  const std::string dir = ds::test::makeScratchDir("aio-concurrent");
  AioConfig c;
  c.blockSize = 64 << 10;
  c.threadCount = 3;
  auto engine = ds::runtime::makePlainEngine(c);
  constexpr int kRequests = 6;
  std::vector<AlignedBuffer> out, in;
  for (int r = 0; r < kRequests; ++r) {
    out.emplace_back(1 << 20);
    in.emplace_back(1 << 20);
    fillRandom(out.back(), 100 + static_cast<uint64_t>(r));
  }
  std::vector<std::thread> callers;
  for (int r = 0; r < kRequests; ++r)
    callers.emplace_back([&, r] {
      const std::string path = dir + "/c" + std::to_string(r);
      for (int round = 0; round < 5; ++round) {
        engine->write(path, out[static_cast<size_t>(r)].data(), 1 << 20, 0);
        engine->read(path, in[static_cast<size_t>(r)].data(), 1 << 20, 0);
      }
    });
  for (auto& t : callers) t.join();
  for (int r = 0; r < kRequests; ++r)
    CHECK(std::memcmp(in[static_cast<size_t>(r)].data(), out[static_cast<size_t>(r)].data(),
                      1 << 20) == 0);
}

TEST_CASE("aio engines: the factory picks libaio only when built in and O_DIRECT works", "[aio]") {
  using ds::runtime::AioBackend;
  struct Case {
    bool built, directIo;
    AioBackend expected;
  };
  for (const Case& c :
       {Case{true, true, AioBackend::kLibaio}, Case{true, false, AioBackend::kPlain},
        Case{false, true, AioBackend::kPlain}, Case{false, false, AioBackend::kPlain}}) {
    INFO("built " << c.built << " directIo " << c.directIo);
    CHECK(ds::runtime::chooseAioBackend(c.built, c.directIo) == c.expected);
  }
  CHECK(ds::runtime::libaioBuilt() == static_cast<bool>(DS_HAVE_LIBAIO));
}

TEST_CASE("aio engines: a build without libaio falls back to pread/pwrite, even on O_DIRECT disks",
          "[aio]") {
  // An O_DIRECT directory where there is one: the case a real disk is, where the fallback used to
  // throw. Else any directory (the choice must not depend on the probe at all).
  std::string whyNot, dir = ds::test::makeDirectIoScratchDir("aio-no-libaio", whyNot);
  if (dir.empty()) dir = ds::test::makeScratchDir("aio-no-libaio");
  AioConfig c;
  c.threadCount = 2;
  for (int call = 0; call < 2; ++call) {  // the notice is printed once; both calls work
    auto engine = ds::runtime::makeAioEngine(c, dir, /*libaioBuilt=*/false);
    CHECK(std::string(engine->name()) == "pread/pwrite");
    AlignedBuffer out(3 << 20), in(3 << 20);
    fillRandom(out, 11 + static_cast<uint64_t>(call));
    engine->write(dir + "/swap", out.data(), out.size(), 4096);
    engine->read(dir + "/swap", in.data(), in.size(), 4096);
    CHECK(std::memcmp(in.data(), out.data(), out.size()) == 0);
  }
}

TEST_CASE("aio engines: libaio: short reads and misalignment are errors that say where", "[aio]") {
  const std::string dir = ds::test::libaioScratchDir("aio-libaio-errors");
  if (dir.empty()) return;
  checkErrors(true, dir);
}

TEST_CASE("aio engines: pread/pwrite: short reads and bad knobs are errors that say where",
          "[aio]") {
  checkErrors(false, ds::test::makeScratchDir("aio-errors"));
  auto bad = [](auto change) {
    AioConfig c;
    change(c);
    return c;
  };
  CHECK_THROWS_WITH(bad([](AioConfig& c) { c.blockSize = 1000; }).validate(),
                    Catch::Contains("aio.block_size"));
  CHECK_THROWS_WITH(bad([](AioConfig& c) { c.queueDepth = 0; }).validate(),
                    Catch::Contains("aio.queue_depth"));
  CHECK_THROWS_WITH(bad([](AioConfig& c) { c.threadCount = 0; }).validate(),
                    Catch::Contains("aio.thread_count"));
  CHECK_THROWS_WITH(bad([](AioConfig& c) { c.useGds = true; }).validate(),
                    Catch::Contains("aio.use_gds: GPU direct storage"));
}
