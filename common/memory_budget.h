// How much more memory this process may take before the kernel stops it: the tightest of the
// memory cgroup limits above it (v1 memory.limit_in_bytes or v2 memory.max, minus what each
// cgroup already uses besides page cache no process maps, which the kernel reclaims first) and the
// machine's MemAvailable. The engine checks its training state
// against it before allocating, so a job that cannot fit fails with a message that says what to
// change instead of being killed by the OOM killer halfway through its start.
#pragma once

#include <cstdint>
#include <string>

namespace ds {

struct MemoryBudget {
  uint64_t availableBytes = 0;
  std::string source;  // "memory cgroup /sys/fs/cgroup/memory/job (limit 512 MiB, 301 MiB used)"
};

// DS_MEMORY_BUDGET_BYTES=N (tests only) replaces everything above with N bytes, so a test can
// show what the pre-flight and the engine refuse without a machine that small.
constexpr const char* kMemoryBudgetVariable = "DS_MEMORY_BUDGET_BYTES";

MemoryBudget memoryBudget();

// "1.25 GiB", "300 MiB": for messages.
std::string humanBytes(double bytes);

}  // namespace ds
