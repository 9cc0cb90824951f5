// A memory cgroup for a test's processes: a hard limit that the kernel enforces (the OOM killer),
// so that a test shows what fits by running it, not by a prediction.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <utility>

namespace ds::test {

namespace fs_cg = std::filesystem;

// A memory cgroup of its own with a hard limit (v1 memory.limit_in_bytes or v2 memory.max),
// removed by the destructor once its processes are gone.
class MemoryCgroup {
 public:
  // `tag` names it (ds-test-TAG-PID), so that tests running side by side do not share one.
  static std::optional<MemoryCgroup> make(const std::string& tag, uint64_t limitBytes) {
    const std::string name = "ds-test-" + tag + "-" + std::to_string(getpid());
    const std::pair<fs_cg::path, const char*> layouts[] = {
        {"/sys/fs/cgroup/memory", "memory.limit_in_bytes"}, {"/sys/fs/cgroup", "memory.max"}};
    for (const auto& [root, limitFile] : layouts) {
      const fs_cg::path dir = root / name;
      std::error_code ec;
      if (!fs_cg::exists(root / "cgroup.procs") || !fs_cg::create_directory(dir, ec)) continue;
      std::ofstream limit(dir / limitFile);
      if (limit << limitBytes << std::flush) return MemoryCgroup(dir);
      fs_cg::remove(dir, ec);
    }
    return std::nullopt;
  }
  MemoryCgroup(MemoryCgroup&& other) noexcept : dir_(std::move(other.dir_)) { other.dir_.clear(); }
  ~MemoryCgroup() {
    std::error_code ec;
    if (!dir_.empty()) fs_cg::remove(dir_, ec);
  }
  // A shell prefix that moves the shell into the cgroup before it runs the rest.
  std::string enter() const { return "echo $$ > " + (dir_ / "cgroup.procs").string() + " && "; }

 private:
  explicit MemoryCgroup(fs_cg::path dir) : dir_(std::move(dir)) {}
  fs_cg::path dir_;
};

}  // namespace ds::test
