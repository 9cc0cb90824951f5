// FNV-1a 64: the project's short-id hash (parameter hashes, config hashes, group ids, init
// seeds per tensor), and its fixed-width hex form. Checksums of data are CRC32C (crc32c.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

namespace ds {

constexpr uint64_t kFnv1a64Offset = 0xcbf29ce484222325ULL;

// FNV-1a 64 over `count` bytes, continuing from `hash` (start with kFnv1a64Offset).
inline uint64_t fnv1a64(const void* bytes, size_t count, uint64_t hash = kFnv1a64Offset) {
  const auto* p = static_cast<const unsigned char*>(bytes);
  for (size_t i = 0; i < count; ++i) {
    hash ^= p[i];
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

// 16 lower-case hex digits.
inline std::string hex64(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(value));
  return text;
}

}  // namespace ds
