// Tampered checkpoint and data files: a `latest`, manifest or config replaced by a link to a
// device, a FIFO or a huge file, and an index that is a device or far larger than its header
// says. Each is refused at once with a message naming the file: nothing blocks, nothing is read
// whole before its size is checked.
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "runtime/data/indexed_dataset.h"
#include "test/run_command.h"
#include "test/scratch_dir.h"

namespace {

namespace fs = std::filesystem;

struct Outcome {
  int status;  // 124: timed out; 128 + signal for a signal death
  std::string output;
  double seconds;
};

// ds-generate DIR under a 20 s timeout and a 4 GiB address-space limit.
Outcome generate(const std::string& dir) {
  const auto start = std::chrono::steady_clock::now();
  const ds::test::CommandOutcome outcome =
      ds::test::runCommand("ulimit -v 4194304 && timeout 20 " + std::string(DS_BIN_DIR) +
                               "/ds-generate " + dir + " --prompt hi",
                           1 << 16);
  return {outcome.status, outcome.output,
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()};
}

// Runs `body` in a child limited to 1 GiB of address space and 10 s; the child's exit status
// (0 when `body` returned true, 124 on the alarm, 128 + signal otherwise).
int inBoundedChild(const std::function<bool()>& body) {
  std::fflush(nullptr);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    const rlimit limit{size_t{1} << 30, size_t{1} << 30};
    setrlimit(RLIMIT_AS, &limit);
    alarm(10);
    bool ok = false;
    try {
      ok = body();
    } catch (...) {
    }
    _exit(ok ? 0 : 1);
  }
  int raw = 0;
  waitpid(child, &raw, 0);
  if (WIFSIGNALED(raw)) return WTERMSIG(raw) == SIGALRM ? 124 : 128 + WTERMSIG(raw);
  return WEXITSTATUS(raw);
}

// Whether IndexedDataset(prefix) throws a message containing `message`.
bool refusedWith(const std::string& prefix, const std::string& message) {
  try {
    ds::runtime::IndexedDataset data(prefix);
  } catch (const std::exception& e) {
    if (std::string(e.what()).find(message) != std::string::npos) return true;
    std::fprintf(stderr, "unexpected message: %s\n", e.what());
  }
  return false;
}

const char* kNeoxConfig =
    R"({"num-layers": 1, "hidden-size": 16, "num-attention-heads": 2, "seq-length": 8,
        "max-position-embeddings": 8, "data-path": "x", "train-iters": 1, "batch-size": 1,
        "tokenizer-type": "ByteTokenizer"})";

}  // namespace

TEST_CASE("robustness: tampered latest, manifest and config files make ds-generate exit 2") {
  const std::string dir = ds::test::makeScratchDir("tampered-ckpt");
  const std::string ckpt = dir + "/ckpt";
  auto reset = [&] {
    fs::remove_all(ckpt);
    fs::create_directories(ckpt + "/global_step1");
    std::ofstream(ckpt + "/neox_config.json") << kNeoxConfig;
    std::ofstream(ckpt + "/latest") << "global_step1\n";
  };
  struct Case {
    const char* name;
    std::function<void()> tamper;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"latest links to /dev/zero",
       [&] {
         fs::remove(ckpt + "/latest");
         fs::create_symlink("/dev/zero", ckpt + "/latest");
       },
       ckpt + "/latest: cannot read latest-checkpoint tag file: is a character device"},
      {"latest is a FIFO",
       [&] {
         fs::remove(ckpt + "/latest");
         REQUIRE(mkfifo((ckpt + "/latest").c_str(), 0600) == 0);
       },
       ckpt + "/latest: cannot read latest-checkpoint tag file: is a FIFO"},
      {"latest is 8 KiB", [&] { std::ofstream(ckpt + "/latest") << std::string(8192, 'g'); },
       ckpt + "/latest: larger than 4 KiB"},
      {"neox_config.json is a FIFO",
       [&] {
         fs::remove(ckpt + "/neox_config.json");
         REQUIRE(mkfifo((ckpt + "/neox_config.json").c_str(), 0600) == 0);
       },
       ckpt + "/neox_config.json: cannot read model config: is a FIFO"},
      {"manifest.json is a FIFO",
       [&] { REQUIRE(mkfifo((ckpt + "/global_step1/manifest.json").c_str(), 0600) == 0); },
       ckpt + "/global_step1/manifest.json: cannot read checkpoint manifest: is a FIFO"},
      {"a 53 MB manifest with 500,000 partitions",
       [&] {
         std::ofstream out(ckpt + "/global_step1/manifest.json");
         out << R"({"files": [)";
         for (int q = 0; q < 500000; ++q)
           out << (q ? "," : "")
               << R"({"bytes": 0, "checksum": "crc32c:00000000", "name": "shard_00000.bin"})";
         out << R"(], "partitions": 500000})";
       },
       "manifest.json: larger than 16 MiB; not a checkpoint manifest"},
      {"a 7 MB manifest with 100,000 partitions",
       [&] {
         std::ofstream out(ckpt + "/global_step1/manifest.json");
         out << R"({"files": [)";
         for (int q = 0; q < 100000; ++q) out << (q ? "," : "") << R"({"bytes": 0})";
         out << R"(], "partitions": 100000})";
       },
       "manifest.json: files: lists 100000 shard files, more than the 65536 ranks"},
      {"a 16 MB manifest of 500,000 tensors",
       [&] {
         std::ofstream out(ckpt + "/global_step1/manifest.json");
         out << R"({"model": {"tensors": [)";
         for (int t = 0; t < 500000; ++t) out << (t ? "," : "") << R"({"name": "t", "numel": 1})";
         out << R"(]}, "files": []})";
       },
       "manifest.json: manifest_checksum: missing"},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    reset();
    c.tamper();
    const Outcome outcome = generate(ckpt);
    INFO(outcome.output.substr(0, 2000));
    CHECK(outcome.status == 2);
    CHECK(outcome.output.find(c.message) != std::string::npos);
    CHECK(outcome.seconds < 10);
  }
}

TEST_CASE(
    "robustness: an index that is a device, a FIFO or larger than its header says is refused "
    "unread") {
  const std::string dir = ds::test::makeScratchDir("tampered-idx");
  {
    ds::runtime::IndexedDatasetWriter writer(dir + "/good", ds::runtime::TokenType::UInt16);
    writer.addSequence({1, 2, 3});
    writer.endDocument();
    writer.finish();
  }
  // A link to /dev/zero: refused at open, not read until memory or the 4 GiB bound runs out.
  fs::copy_file(dir + "/good.bin", dir + "/zero.bin");
  fs::create_symlink("/dev/zero", dir + "/zero.idx");
  CHECK(inBoundedChild([&] {
          return refusedWith(dir + "/zero",
                             "zero.idx: cannot read indexed dataset index: is a "
                             "character device");
        }) == 0);
  // A valid header padded (sparsely) to 3 GB: its counts say how large it must be.
  fs::copy_file(dir + "/good.bin", dir + "/sparse.bin");
  fs::copy_file(dir + "/good.idx", dir + "/sparse.idx");
  fs::resize_file(dir + "/sparse.idx", uint64_t{3} << 30);
  CHECK(inBoundedChild([&] {
          return refusedWith(dir + "/sparse",
                             "sparse.idx: 1 sequences and 2 document entries do not match its "
                             "3221225472 bytes");
        }) == 0);
  // A FIFO for the tokens: refused, not waited on.
  fs::copy_file(dir + "/good.idx", dir + "/fifo.idx");
  REQUIRE(mkfifo((dir + "/fifo.bin").c_str(), 0600) == 0);
  CHECK(inBoundedChild([&] {
          return refusedWith(dir + "/fifo",
                             "fifo.bin: cannot read indexed dataset tokens: is a "
                             "FIFO");
        }) == 0);
  // The good one still loads.
  const ds::runtime::IndexedDataset good(dir + "/good");
  CHECK(good.read(0) == std::vector<int32_t>{1, 2, 3});
}
