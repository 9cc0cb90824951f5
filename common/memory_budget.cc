#include "common/memory_budget.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

namespace ds {
namespace {

namespace fs = std::filesystem;

// A number from a one-line cgroup file; "max" (v2: no limit) and anything unreadable are none.
bool readNumber(const fs::path& file, uint64_t& out) {
  std::ifstream in(file);
  std::string word;
  if (!(in >> word) || word == "max") return false;
  try {
    out = std::stoull(word);
    return true;
  } catch (...) {
    return false;
  }
}

struct Hierarchy {
  fs::path root;        // where the hierarchy is mounted
  std::string path;     // this process's cgroup in it ("/" for the root)
  const char* limitFile;
  const char* usageFile;
  const char* statPrefix;  // memory.stat's key prefix for the hierarchy's totals: v1 "total_"
  const char* mappedKey;   // memory.stat's mapped page cache: v1 "mapped_file", v2 "file_mapped"
};

// The cgroup's page cache that no process maps (memory.stat: file pages on the LRU lists less
// the mapped ones): charged to it, counted in its usage, but given back by the kernel before it
// would stop anyone. The shared libraries a finished job read stay charged that way.
uint64_t reclaimableCache(const fs::path& dir, const Hierarchy& h) {
  std::ifstream in(dir / "memory.stat");
  const std::string prefix = h.statPrefix;
  uint64_t active = 0, inactive = 0, mapped = 0;
  std::string key;
  uint64_t value = 0;
  while (in >> key >> value) {
    if (key == prefix + "active_file") active = value;
    if (key == prefix + "inactive_file") inactive = value;
    if (key == prefix + h.mappedKey) mapped = value;
  }
  return active + inactive > mapped ? active + inactive - mapped : 0;
}

// The memory hierarchy this process is in, from /proc/self/cgroup: a v1 "N:memory:/path" line
// (mounted at /sys/fs/cgroup/memory) or the v2 "0::/path" line (at /sys/fs/cgroup, or at
// /sys/fs/cgroup/unified in hybrid layouts).
bool findHierarchy(Hierarchy& out) {
  std::ifstream in("/proc/self/cgroup");
  std::string line, unifiedPath;
  bool unified = false;
  while (std::getline(in, line)) {
    const size_t first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string path = line.substr(second + 1);
    std::stringstream list(controllers);
    for (std::string c; std::getline(list, c, ',');)
      if (c == "memory" && fs::exists("/sys/fs/cgroup/memory/memory.limit_in_bytes")) {
        out = {"/sys/fs/cgroup/memory", path,      "memory.limit_in_bytes",
               "memory.usage_in_bytes", "total_", "mapped_file"};
        return true;
      }
    if (controllers.empty()) {
      unified = true;
      unifiedPath = path;
    }
  }
  if (!unified) return false;
  for (const char* root : {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"})
    if (fs::exists(fs::path(root) / "cgroup.controllers")) {
      out = {root, unifiedPath, "memory.max", "memory.current", "", "file_mapped"};
      return true;
    }
  return false;
}

double meminfoAvailable() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (in >> key >> kib) {
    std::getline(in, unit);
    if (key == "MemAvailable:") return static_cast<double>(kib) * 1024.0;
  }
  return std::numeric_limits<double>::infinity();
}

}  // namespace

std::string humanBytes(double bytes) {
  char text[32];
  if (bytes >= 1024.0 * 1024 * 1024)
    std::snprintf(text, sizeof(text), "%.2f GiB", bytes / (1024.0 * 1024 * 1024));
  else
    std::snprintf(text, sizeof(text), "%.0f MiB", bytes / (1024.0 * 1024));
  return text;
}

MemoryBudget memoryBudget() {
  MemoryBudget budget;
  if (const char* fake = std::getenv(kMemoryBudgetVariable); fake && *fake) {
    budget.availableBytes = std::stoull(fake);
    budget.source = std::string(kMemoryBudgetVariable) + " (" +
                    humanBytes(static_cast<double>(budget.availableBytes)) + ", a test override)";
    return budget;
  }
  double available = meminfoAvailable();
  budget.source = "the machine's available memory (" + humanBytes(available) + ")";
  Hierarchy h;
  if (findHierarchy(h)) {
    // Every level's limit applies; a path that is not visible here (another namespace) is skipped.
    const fs::path root = h.root.lexically_normal();
    for (fs::path dir = (root / fs::path(h.path).relative_path()).lexically_normal();;
         dir = dir.parent_path()) {
      uint64_t limit = 0, usage = 0;
      if (fs::is_directory(dir) && readNumber(dir / h.limitFile, limit) &&
          readNumber(dir / h.usageFile, usage) && limit < (uint64_t{1} << 60)) {
        const uint64_t cache = std::min(usage, reclaimableCache(dir, h));
        usage -= cache;
        const double left = limit > usage ? static_cast<double>(limit - usage) : 0.0;
        if (left < available) {
          available = left;
          budget.source = "the memory cgroup " + dir.string() + " (limit " +
                          humanBytes(static_cast<double>(limit)) + ", " +
                          humanBytes(static_cast<double>(usage)) + " in use besides " +
                          humanBytes(static_cast<double>(cache)) + " of page cache)";
        }
      }
      if (dir.string().size() <= root.string().size()) break;
    }
  }
  budget.availableBytes = available == std::numeric_limits<double>::infinity()
                              ? std::numeric_limits<uint64_t>::max()
                              : static_cast<uint64_t>(available);
  return budget;
}

}  // namespace ds
