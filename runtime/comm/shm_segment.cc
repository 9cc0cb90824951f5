// ShmSegment over shm_open + mmap.
#include "runtime/comm/shm_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <random>
#include <utility>

#include "common/error.h"

namespace ds::runtime {
namespace {

void* mapWhole(int fd, size_t bytes, const std::string& name) {
  void* data = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (data == MAP_FAILED)
    throw Error("shared memory " + name + ": mmap of " + std::to_string(bytes) +
                " bytes failed: " + std::strerror(errno));
  return data;
}

// Names this process created and still owns, in a fixed table so that unlinkOwnedShmSegments
// needs no lock and no allocation. A slot is free (0), being written (1) or holds a name (2).
constexpr size_t kOwnedSlots = 64, kOwnedNameBytes = 96;
std::atomic<int> ownedState[kOwnedSlots];
char ownedName[kOwnedSlots][kOwnedNameBytes];

void rememberOwned(const std::string& name) {
  if (name.size() >= kOwnedNameBytes) return;
  for (size_t i = 0; i < kOwnedSlots; ++i) {
    int expected = 0;
    if (!ownedState[i].compare_exchange_strong(expected, 1)) continue;
    std::memcpy(ownedName[i], name.c_str(), name.size() + 1);
    ownedState[i].store(2, std::memory_order_release);
    return;
  }
}

void forgetOwned(const std::string& name) {
  for (size_t i = 0; i < kOwnedSlots; ++i) {
    if (ownedState[i].load(std::memory_order_acquire) != 2 || name != ownedName[i]) continue;
    ownedState[i].store(0, std::memory_order_release);
    return;
  }
}

}  // namespace

void unlinkOwnedShmSegments() {
  for (size_t i = 0; i < kOwnedSlots; ++i) {
    int expected = 2;
    if (ownedState[i].compare_exchange_strong(expected, 1)) {
      shm_unlink(ownedName[i]);
      ownedState[i].store(0, std::memory_order_release);
    }
  }
}

ShmSegment ShmSegment::create(const std::string& name, size_t bytes) {
  const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) throw Error("shared memory " + name + ": cannot create it: " + std::strerror(errno));
  // posix_fallocate reserves the pages now: a full /dev/shm fails here, not with SIGBUS later.
  if (const int error = posix_fallocate(fd, 0, static_cast<off_t>(bytes)); error != 0) {
    close(fd);
    shm_unlink(name.c_str());
    throw Error("shared memory " + name + ": cannot reserve " + std::to_string(bytes >> 20) +
                " MiB in /dev/shm: " + std::strerror(error));
  }
  ShmSegment segment;
  segment.name_ = name;
  segment.size_ = bytes;
  segment.owner_ = true;
  rememberOwned(name);
  try {
    segment.data_ = mapWhole(fd, bytes, name);
  } catch (...) {
    close(fd);
    segment.unlinkName();
    throw;
  }
  close(fd);
  return segment;
}

ShmSegment ShmSegment::anonymous(size_t bytes) {
  void* data = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (data == MAP_FAILED)
    throw Error("in-process group: mmap of " + std::to_string(bytes) +
                " bytes failed: " + std::strerror(errno));
  ShmSegment segment;
  segment.data_ = data;
  segment.size_ = bytes;
  return segment;
}

ShmSegment ShmSegment::open(const std::string& name) {
  const int fd = shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0) throw Error("shared memory " + name + ": cannot open it: " + std::strerror(errno));
  struct stat info {};
  fstat(fd, &info);
  ShmSegment segment;
  segment.name_ = name;
  segment.size_ = static_cast<size_t>(info.st_size);
  try {
    segment.data_ = mapWhole(fd, segment.size_, name);
  } catch (...) {
    close(fd);
    throw;
  }
  close(fd);
  return segment;
}

ShmSegment::ShmSegment(ShmSegment&& other) noexcept { *this = std::move(other); }

ShmSegment& ShmSegment::operator=(ShmSegment&& other) noexcept {
  std::swap(name_, other.name_);
  std::swap(data_, other.data_);
  std::swap(size_, other.size_);
  std::swap(owner_, other.owner_);
  return *this;
}

ShmSegment::~ShmSegment() {
  if (data_ != nullptr) munmap(data_, size_);
  unlinkName();
}

void ShmSegment::unlinkName() {
  if (owner_) {
    forgetOwned(name_);
    shm_unlink(name_.c_str());
  }
  owner_ = false;
}

std::string uniqueShmName(const std::string& purpose) {
  std::random_device device;
  char suffix[17];
  std::snprintf(suffix, sizeof(suffix), "%08x%08x", device(), device());
  return "/ds-" + purpose + "-" + std::to_string(getpid()) + "-" + suffix;
}

}  // namespace ds::runtime
