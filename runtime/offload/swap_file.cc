#include "runtime/offload/swap_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include <atomic>

#include "common/crc32c.h"
#include "common/errno_text.h"
#include "common/error.h"

namespace ds::runtime {
namespace {

// Small enough that a mismatch names a narrow range, large enough that the table stays small
// (4 bytes per MiB swapped).
constexpr size_t kChecksumPiece = size_t{1} << 20;

std::atomic<bool> checksumsOn{true};

std::vector<uint32_t> pieceChecksums(const void* buffer, size_t bytes) {
  std::vector<uint32_t> pieces((bytes + kChecksumPiece - 1) / kChecksumPiece);
  crc32cPieces(buffer, bytes, kChecksumPiece, pieces.data());
  return pieces;
}

}  // namespace

void setSwapChecksums(bool on) { checksumsOn = on; }

SwapRegion wholePages(void* data, size_t bytes) {
  constexpr uintptr_t kPage = AlignedBuffer::kAlignment;
  const auto begin = reinterpret_cast<uintptr_t>(data);
  const uintptr_t first = (begin + kPage - 1) / kPage * kPage, last = (begin + bytes) / kPage * kPage;
  if (last <= first) return {data, 0};
  return {reinterpret_cast<void*>(first), last - first};
}

void givePagesBack(void* data, size_t bytes) {
  const SwapRegion pages = wholePages(data, bytes);
  if (pages.bytes > 0) madvise(pages.data, pages.bytes, MADV_DONTNEED);
}

void zeroUntouched(void* data, size_t bytes) {
  const SwapRegion pages = wholePages(data, bytes);
  if (pages.bytes == 0) {
    std::memset(data, 0, bytes);
    return;
  }
  char* begin = static_cast<char*>(data);
  char* first = static_cast<char*>(pages.data);
  std::memset(begin, 0, static_cast<size_t>(first - begin));
  std::memset(first + pages.bytes, 0, static_cast<size_t>(begin + bytes - (first + pages.bytes)));
  givePagesBack(pages.data, pages.bytes);
}

void preferHugePages(void* data, size_t bytes) {
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  const auto begin = reinterpret_cast<uintptr_t>(data);
  const uintptr_t first = (begin + kHuge - 1) / kHuge * kHuge, last = (begin + bytes) / kHuge * kHuge;
  if (last > first) madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
}

void SwapFile::checkSpace(const std::string& directory, uint64_t bytes, const std::string& what) {
  struct statvfs fs {};
  if (statvfs(directory.c_str(), &fs) != 0)
    throw Error(what + ".nvme_path " + directory + ": " + errnoText(errno));
  const uint64_t free = static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
  if (free < bytes)
    throw Error(what + ".nvme_path " + directory + ": the offloaded state needs " +
                std::to_string(bytes) + " bytes of swap, " + std::to_string(free) +
                " are free; free space or choose another directory");
}

SwapFile::SwapFile(const AioConfig& aio, const std::string& directory, int rank,
                   uint64_t reserveBytes, std::string what, const std::string& stem)
    : what_(std::move(what)), reservedBytes_(reserveBytes), checksums_(checksumsOn) {
  if (!std::filesystem::is_directory(directory))
    throw Error(what_ + ".nvme_path " + directory + ": not a directory");
  engine_ = makeAioEngine(aio, directory);
  checkSpace(directory, reservedBytes_, what_);
  // A fresh name per process and rank; unlinked at once, reached through /proc/self/fd.
  const std::string name = directory + "/.ds-" + stem + "-swap-" + std::to_string(getpid()) +
                           "-rank" + std::to_string(rank);
  fd_ = open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd_ < 0) throw Error(name + ": cannot create the swap file: " + errnoText(errno));
  unlink(name.c_str());
  name_ = name;
  if (reservedBytes_ > 0) {
    if (const int rc = posix_fallocate(fd_, 0, static_cast<off_t>(reservedBytes_)); rc != 0) {
      close(fd_);
      throw Error(directory + ": cannot reserve " + std::to_string(reservedBytes_) +
                  " bytes for the " + what_ + " swap file: " + errnoText(rc));
    }
  }
  path_ = "/proc/self/fd/" + std::to_string(fd_);
}

SwapFile::~SwapFile() {
  if (fd_ >= 0) close(fd_);
}

uint64_t SwapFile::allocate(uint64_t bytes) {
  if (usedBytes_ + bytes > reservedBytes_)
    throw Error(what_ + " swap file: the state outgrew the " + std::to_string(reservedBytes_) +
                " bytes reserved for it (a bug: the reservation must cover every region)");
  const uint64_t offset = usedBytes_;
  usedBytes_ += bytes;
  return offset;
}

namespace {

// The engine's message starts with the path it opened (/proc/self/fd/N), which means nothing
// once the process is gone: the swap file's own name replaces it.
[[noreturn]] void rethrowNamed(const Error& e, const std::string& what, const std::string& path,
                               const std::string& name) {
  std::string text = e.what();
  if (text.rfind(path, 0) == 0) text.replace(0, path.size(), name + " (unlinked)");
  throw Error(what + " swap file " + text);
}

}  // namespace

void SwapFile::read(void* buffer, size_t bytes, uint64_t offset) const {
  try {
    engine_->read(path_, buffer, bytes, offset);
  } catch (const Error& e) {
    rethrowNamed(e, what_, path_, name_);
  }
  if (checksums_) verify(buffer, bytes, offset);
}

void SwapFile::write(const void* buffer, size_t bytes, uint64_t offset) const {
  // Computed before the write: the caller keeps the buffer unchanged until the write returns.
  Written record;
  if (checksums_) record = {bytes, pieceChecksums(buffer, bytes)};
  {
    // A write that fails half-way leaves the region unknown: nothing to verify it against.
    std::lock_guard lock(writtenMutex_);
    written_.erase(offset);
  }
  try {
    engine_->write(path_, buffer, bytes, offset);
  } catch (const Error& e) {
    rethrowNamed(e, what_, path_, name_);
  }
  if (checksums_) {
    std::lock_guard lock(writtenMutex_);
    written_[offset] = std::move(record);
  }
}

void SwapFile::verify(const void* buffer, size_t bytes, uint64_t offset) const {
  std::vector<uint32_t> expected;
  {
    std::lock_guard lock(writtenMutex_);
    const auto it = written_.find(offset);
    if (it == written_.end() || it->second.bytes != bytes) return;  // not one write's bytes
    expected = it->second.pieces;
  }
  const std::vector<uint32_t> got = pieceChecksums(buffer, bytes);
  for (size_t p = 0; p < expected.size(); ++p) {
    const size_t begin = p * kChecksumPiece, length = std::min(kChecksumPiece, bytes - begin);
    if (got[p] != expected[p])
      throw Error(what_ + " swap file " + name_ + " (unlinked): the " + std::to_string(length) +
                  " bytes at offset " + std::to_string(offset + begin) +
                  " read back with checksum crc32c:" + hex32(got[p]) + ", written with crc32c:" +
                  hex32(expected[p]) +
                  ": the file was changed under the job or the device returned other data; "
                  "check the device and resume from the last checkpoint");
  }
}

}  // namespace ds::runtime
