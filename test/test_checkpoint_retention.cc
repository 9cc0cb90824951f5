// keep-last-n-checkpoints at the checkpoint layer: which directories go (the oldest complete
// global_stepN beyond N), which never do (`latest`'s, incomplete ones, other names, files), and
// that a deletion a crash interrupted is finished later without costing a kept checkpoint.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <set>
#include <string>

#include "runtime/checkpoint/checkpoint_retention.h"
#include "test/scratch_dir.h"

namespace fs = std::filesystem;
using ds::runtime::deleteOldCheckpoints;

namespace {

void write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

void checkpoint(const fs::path& dir, const std::string& tag) {
  write(dir / tag / "manifest.json", "{}");
  write(dir / tag / "shard-0.bin", "x");
}

// A scratch directory `name` holding a complete global_stepN for each of `steps`, no `latest`.
fs::path withCheckpoints(const std::string& name, std::initializer_list<int> steps) {
  const fs::path dir = ds::test::makeScratchDir(name);
  for (int step : steps) checkpoint(dir, "global_step" + std::to_string(step));
  return dir;
}

std::set<std::string> entries(const fs::path& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.insert(e.path().filename().string());
  return out;
}

}  // namespace

TEST_CASE("checkpoint retention: the oldest beyond N go, by step number", "[checkpoint]") {
  const fs::path dir = withCheckpoints("retention", {10, 20, 30, 40, 100});
  write(dir / "latest", "global_step100\n");
  CHECK(deleteOldCheckpoints(dir.string(), 2) ==
        std::vector<std::string>{"global_step10", "global_step20", "global_step30"});
  CHECK(entries(dir) == std::set<std::string>{"global_step40", "global_step100", "latest"});
  CHECK(deleteOldCheckpoints(dir.string(), 2).empty());  // already N
  CHECK(deleteOldCheckpoints(dir.string(), 1) == std::vector<std::string>{"global_step40"});
  CHECK(entries(dir) == std::set<std::string>{"global_step100", "latest"});
}

TEST_CASE("checkpoint retention: latest's is kept even when it is not the highest step",
          "[checkpoint]") {
  // A finetune run saving into a directory that holds a longer run's checkpoints.
  const fs::path dir = withCheckpoints("retention-latest", {5000, 6000, 100});
  write(dir / "latest", "global_step100\n");
  CHECK(deleteOldCheckpoints(dir.string(), 2) == std::vector<std::string>{"global_step5000"});
  CHECK(entries(dir) == std::set<std::string>{"global_step100", "global_step6000", "latest"});
  CHECK(deleteOldCheckpoints(dir.string(), 1) == std::vector<std::string>{"global_step6000"});
  CHECK(entries(dir) == std::set<std::string>{"global_step100", "latest"});
}

TEST_CASE("checkpoint retention: only complete trainer checkpoints are candidates",
          "[checkpoint]") {
  const fs::path dir = withCheckpoints("retention-others", {1, 2});
  write(dir / "global_step0" / "shard-0.bin", "no manifest: not complete");
  checkpoint(dir, "global_step07");  // not a name the trainers write
  checkpoint(dir, "best");
  write(dir / "global_step3", "a file");
  write(dir / ".tmp-global_step4" / "manifest.json", "{}");  // a save in progress
  write(dir / "neox_config.json", "{}");
  write(dir / "latest", "global_step2\n");
  const std::set<std::string> before = entries(dir);
  CHECK(deleteOldCheckpoints(dir.string(), 1) == std::vector<std::string>{"global_step1"});
  std::set<std::string> expected = before;
  expected.erase("global_step1");
  CHECK(entries(dir) == expected);
}

TEST_CASE("checkpoint retention: an interrupted deletion is finished, nothing without latest",
          "[checkpoint]") {
  const fs::path dir = withCheckpoints("retention-crash", {1, 2});
  // What a crash in the middle of removing global_step0 leaves: renamed aside, half gone.
  write(dir / ".deleting-global_step0" / "shard-1.bin", "x");
  // No `latest` yet: nothing is known to be complete and published, so nothing goes.
  CHECK(deleteOldCheckpoints(dir.string(), 1).empty());
  CHECK(fs::exists(dir / "global_step1"));
  CHECK(fs::exists(dir / ".deleting-global_step0"));
  write(dir / "latest", "global_step2\n");
  CHECK(deleteOldCheckpoints(dir.string(), 3).empty());  // fewer than N: all kept
  CHECK(entries(dir) == std::set<std::string>{"global_step1", "global_step2", "latest"});
  CHECK_THROWS(deleteOldCheckpoints(dir.string(), 0));
}
