// AlignedVector<T>: a std::vector whose storage starts on a 64-byte (cache line, AVX-512 vector)
// boundary and whose resize() leaves new elements uninitialised (default-initialised), so that a
// large buffer costs no page until it is written. The training state's big arrays use it: an
// offloaded master can be filled and swapped out piece by piece without ever being resident whole.
// Callers that need zeros say so (assign(n, 0)).
#pragma once

#include <cstddef>
#include <new>
#include <utility>
#include <vector>

namespace ds {

template <class T>
struct CacheLineAllocator {
  using value_type = T;
  static constexpr std::align_val_t kAlignment{64};

  CacheLineAllocator() = default;
  template <class U>
  CacheLineAllocator(const CacheLineAllocator<U>&) noexcept {}

  T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), kAlignment)); }
  void deallocate(T* p, size_t) noexcept { ::operator delete(p, kAlignment); }
  // Default-initialisation: no write for trivial types.
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }

  template <class U>
  bool operator==(const CacheLineAllocator<U>&) const noexcept {
    return true;
  }
  template <class U>
  bool operator!=(const CacheLineAllocator<U>&) const noexcept {
    return false;
  }
};

template <class T>
using AlignedVector = std::vector<T, CacheLineAllocator<T>>;

}  // namespace ds
