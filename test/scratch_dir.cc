// Scratch directories: created unique per process and call, removed by a static owner's
// destructor at exit.
#include "test/scratch_dir.h"

#include <unistd.h>

#include <filesystem>
#include <mutex>
#include <vector>

namespace ds::test {
namespace {

struct ScratchOwner {
  std::mutex mutex;
  std::vector<std::filesystem::path> dirs;
  int next = 0;
  ~ScratchOwner() {
    std::error_code ignored;
    for (const auto& dir : dirs) std::filesystem::remove_all(dir, ignored);
  }
};

ScratchOwner& owner() {
  static ScratchOwner instance;
  return instance;
}

}  // namespace

std::string makeScratchDir(const std::string& name) {
  ScratchOwner& o = owner();
  std::lock_guard lock(o.mutex);
  const auto dir =
      std::filesystem::temp_directory_path() /
      ("ds-test-" + name + "-" + std::to_string(getpid()) + "-" + std::to_string(o.next++));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  o.dirs.push_back(dir);
  return dir.string();
}

}  // namespace ds::test
