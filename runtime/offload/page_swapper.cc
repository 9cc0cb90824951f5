#include "runtime/offload/page_swapper.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "common/error.h"

namespace ds::runtime {
namespace {

constexpr uintptr_t kPage = AlignedBuffer::kAlignment;

}  // namespace

void PageSwapper::checkSpace(const std::string& directory, uint64_t bytes,
                             const std::string& what) {
  struct statvfs fs {};
  if (statvfs(directory.c_str(), &fs) != 0)
    throw Error(what + ".nvme_path " + directory + ": " + std::strerror(errno));
  const uint64_t free = static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
  if (free < bytes)
    throw Error(what + ".nvme_path " + directory + ": the offloaded state needs " +
                std::to_string(bytes) + " bytes of swap, " + std::to_string(free) +
                " are free; free space or choose another directory");
}

PageSwapper::PageSwapper(const AioConfig& aio, const std::string& directory, int rank,
                         uint64_t reserveBytes, std::string what, const std::string& stem)
    : what_(std::move(what)), reservedBytes_(reserveBytes) {
  if (!std::filesystem::is_directory(directory))
    throw Error(what_ + ".nvme_path " + directory + ": not a directory");
  engine_ = makeAioEngine(aio, directory);
  checkSpace(directory, reservedBytes_, what_);
  // A fresh name per process and rank; unlinked at once, reached through /proc/self/fd.
  const std::string name = directory + "/.ds-" + stem + "-swap-" + std::to_string(getpid()) +
                           "-rank" + std::to_string(rank);
  fd_ = open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd_ < 0) throw Error(name + ": cannot create the swap file: " + std::strerror(errno));
  unlink(name.c_str());
  if (reservedBytes_ > 0) {
    if (const int rc = posix_fallocate(fd_, 0, static_cast<off_t>(reservedBytes_)); rc != 0) {
      close(fd_);
      throw Error(directory + ": cannot reserve " + std::to_string(reservedBytes_) +
                  " bytes for the " + what_ + " swap file: " + std::strerror(rc));
    }
  }
  path_ = "/proc/self/fd/" + std::to_string(fd_);
}

size_t PageSwapper::addGroup(const std::vector<Region>& regions) {
  std::vector<Piece> pieces;
  for (const Region& r : regions) {
    const auto begin = reinterpret_cast<uintptr_t>(r.data);
    const auto end = begin + r.bytes;
    const uintptr_t first = (begin + kPage - 1) / kPage * kPage, last = end / kPage * kPage;
    if (last <= first) continue;  // no whole page: it simply stays in memory
    pieces.push_back({reinterpret_cast<char*>(first), last - first, fileBytes_});
    fileBytes_ += last - first;
  }
  if (fileBytes_ > reservedBytes_)
    throw Error(what_ + " swap file: the state outgrew the " + std::to_string(reservedBytes_) +
                " bytes reserved for it (a bug: the reservation must cover every region)");
  pieces_.push_back(std::move(pieces));
  resident_.push_back(1);
  freeAfterWrite_.push_back(0);
  reads_.emplace_back();
  writes_.emplace_back();
  const size_t g = pieces_.size() - 1;
  writeGroup(g);
  freePages(g);
  return g;
}

PageSwapper::~PageSwapper() {
  for (auto& f : reads_)
    if (f.valid()) f.wait();
  for (auto& f : writes_)
    if (f.valid()) f.wait();
  if (fd_ >= 0) close(fd_);
}

void PageSwapper::startRead(size_t g) {
  if (resident_[g] || reads_[g].valid()) return;
  // pieces_ is complete before the first step: the task may read it in place.
  reads_[g] = std::async(std::launch::async, [this, g] {
    for (const Piece& p : pieces_[g]) engine_->read(path_, p.at, p.bytes, p.offset);
  });
}

void PageSwapper::writeGroup(size_t g) const {
  for (const Piece& p : pieces_[g]) engine_->write(path_, p.at, p.bytes, p.offset);
}

void PageSwapper::waitRead(size_t g) {
  if (resident_[g]) return;
  startRead(g);
  reads_[g].get();
  resident_[g] = 1;
}

void PageSwapper::waitWrite(size_t g) {
  if (!writes_[g].valid()) return;
  writes_[g].get();
  if (freeAfterWrite_[g]) freePages(g);
}

void PageSwapper::freePages(size_t g) {
  for (const Piece& p : pieces_[g]) madvise(p.at, p.bytes, MADV_DONTNEED);
  resident_[g] = 0;
  freeAfterWrite_[g] = 0;
}

void PageSwapper::swapOutAll() {
  for (size_t g = 0; g < pieces_.size(); ++g) {
    waitWrite(g);
    if (!resident_[g]) continue;
    writeGroup(g);
    freePages(g);
  }
}

void PageSwapper::swapInAll() {
  for (size_t g = 0; g < pieces_.size(); ++g) fetch(g);
}

void PageSwapper::acquire(size_t g) {
  waitWrite(g);  // a write of this group still in flight (it was just released)
  waitRead(g);
  if (g + 1 < pieces_.size()) {
    waitWrite(g + 1);
    startRead(g + 1);  // overlapped with this group's update
  }
}

void PageSwapper::release(size_t g, bool freeEarly) {
  writes_[g] = std::async(std::launch::async, [this, g] { writeGroup(g); });
  freeAfterWrite_[g] = freeEarly;
  if (g >= 2) waitWrite(g - 2);  // at most three groups in memory while streaming
}

void PageSwapper::fetch(size_t g) {
  waitWrite(g);
  waitRead(g);
}

void PageSwapper::dropClean(size_t g) {
  waitWrite(g);
  if (resident_[g]) freePages(g);
}

void PageSwapper::markAllResident() {
  for (size_t g = 0; g < pieces_.size(); ++g) {
    waitWrite(g);
    if (reads_[g].valid()) reads_[g].get();  // a read in flight would overwrite the new values
    resident_[g] = 1;
  }
}

void PageSwapper::endStep() {
  for (size_t g = 0; g < pieces_.size(); ++g) {
    waitWrite(g);
    if (resident_[g]) freePages(g);
  }
  // The next step's first group comes in while the next forward and backward passes run.
  if (!pieces_.empty()) startRead(0);
}

}  // namespace ds::runtime
