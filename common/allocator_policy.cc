#include "common/allocator_policy.h"

#include <malloc.h>

#include <mutex>

namespace ds {

void keepFreedMemoryForReuse() {
  static std::once_flag once;
  std::call_once(once, [] {
    constexpr int kThreshold = 1 << 30;
    mallopt(M_MMAP_THRESHOLD, kThreshold);
    mallopt(M_TRIM_THRESHOLD, kThreshold);
  });
}

}  // namespace ds
