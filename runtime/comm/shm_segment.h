// ShmSegment: a named POSIX shared-memory segment mapped into this process. The creator sizes it;
// others open it by name. Whoever created it unlinks the name (unlinkName) once every peer has
// opened it, so nothing is left in /dev/shm even if the job dies later; a process that dies before
// that calls unlinkOwnedShmSegments on its way out.
#pragma once

#include <cstddef>
#include <string>

namespace ds::runtime {

class ShmSegment {
 public:
  // Throws ds::Error naming the segment (exists already, /dev/shm full, ...).
  static ShmSegment create(const std::string& name, size_t bytes);
  static ShmSegment open(const std::string& name);
  // Memory with no name, shared by the threads of this process (and children forked later).
  static ShmSegment anonymous(size_t bytes);

  ShmSegment() = default;
  ShmSegment(ShmSegment&& other) noexcept;
  ShmSegment& operator=(ShmSegment&& other) noexcept;
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;
  ~ShmSegment();

  void* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& name() const { return name_; }
  void unlinkName();

 private:
  std::string name_;
  void* data_ = nullptr;
  size_t size_ = 0;
  bool owner_ = false;
};

// Unlinks every segment name this process created and has not unlinked yet. For exit paths that
// skip destructors (_exit after an abort during rendezvous): async-signal-safe, lock-free, callable
// from any thread.
void unlinkOwnedShmSegments();

// A name no other job uses: "/ds-<pid>-<random>".
std::string uniqueShmName(const std::string& purpose);

}  // namespace ds::runtime
