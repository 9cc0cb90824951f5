// Scratch directories: created unique per process and call, removed by a static owner's
// destructor at exit.
#include "test/scratch_dir.h"

#include <fcntl.h>
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

std::filesystem::path makeScratchDirIn(const std::filesystem::path& parent,
                                       const std::string& name) {
  ScratchOwner& o = owner();
  std::lock_guard lock(o.mutex);
  const auto dir = parent / ("ds-test-" + name + "-" + std::to_string(getpid()) + "-" +
                             std::to_string(o.next++));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  o.dirs.push_back(dir);
  return dir;
}

// Whether a file in `dir` opens with O_DIRECT: written here rather than taken from the runtime's
// directIoSupported(), so that a wrong answer there cannot choose the test's own directory.
bool takesDirectIo(const std::filesystem::path& dir) {
  const std::string probe = (dir / "o_direct-probe").string();
  const int fd = ::open(probe.c_str(), O_CREAT | O_RDWR | O_DIRECT, 0600);
  if (fd >= 0) ::close(fd);
  ::unlink(probe.c_str());
  return fd >= 0;
}

}  // namespace

std::string makeScratchDir(const std::string& name) {
  return makeScratchDirIn(std::filesystem::temp_directory_path(), name).string();
}

std::string makeDirectIoScratchDir(const std::string& name, std::string& whyNot) {
  const std::filesystem::path temp = std::filesystem::temp_directory_path();
  // DS_TEST_BUILD_DIR: the build tree's test folder (test/CMakeLists.txt).
  for (const std::filesystem::path& parent : {temp, std::filesystem::path(DS_TEST_BUILD_DIR)}) {
    const std::filesystem::path dir = makeScratchDirIn(parent, name);
    if (takesDirectIo(dir)) return dir.string();
  }
  whyNot = "neither " + temp.string() + " nor " + DS_TEST_BUILD_DIR +
           " takes O_DIRECT files (tmpfs?): the libaio engine is not tested here";
  return "";
}

}  // namespace ds::test
