#include "runtime/offload/optimizer_swapper.h"

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

void OptimizerSwapper::checkSpace(const std::string& directory, uint64_t bytes) {
  struct statvfs fs {};
  if (statvfs(directory.c_str(), &fs) != 0)
    throw Error("offload_optimizer.nvme_path " + directory + ": " + std::strerror(errno));
  const uint64_t free = static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
  if (free < bytes)
    throw Error("offload_optimizer.nvme_path " + directory + ": the optimizer state needs " +
                std::to_string(bytes) + " bytes of swap, " + std::to_string(free) +
                " are free; free space or choose another directory");
}

OptimizerSwapper::OptimizerSwapper(const AioConfig& aio, const std::string& directory, int rank,
                                   std::vector<std::vector<Array>> groups) {
  if (!std::filesystem::is_directory(directory))
    throw Error("offload_optimizer.nvme_path " + directory + ": not a directory");
  engine_ = makeAioEngine(aio, directory);
  uint64_t offset = 0;
  for (const auto& group : groups) {
    std::vector<Piece> pieces;
    for (const Array& a : group) {
      const auto begin = reinterpret_cast<uintptr_t>(a.data);
      const auto end = begin + a.count * sizeof(float);
      const uintptr_t first = (begin + kPage - 1) / kPage * kPage, last = end / kPage * kPage;
      if (last <= first) continue;  // smaller than a page: it simply stays in memory
      pieces.push_back({reinterpret_cast<char*>(first), last - first, offset});
      offset += last - first;
    }
    pieces_.push_back(std::move(pieces));
  }
  fileBytes_ = offset;
  checkSpace(directory, fileBytes_);
  // A fresh name per process and rank; unlinked at once, reached through /proc/self/fd.
  const std::string name = directory + "/.ds-optimizer-swap-" + std::to_string(getpid()) + "-rank" +
                           std::to_string(rank);
  fd_ = open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd_ < 0) throw Error(name + ": cannot create the swap file: " + std::strerror(errno));
  unlink(name.c_str());
  if (fileBytes_ > 0) {
    if (const int rc = posix_fallocate(fd_, 0, static_cast<off_t>(fileBytes_)); rc != 0) {
      close(fd_);
      throw Error(directory + ": cannot reserve " + std::to_string(fileBytes_) +
                  " bytes for the optimizer swap file: " + std::strerror(rc));
    }
  }
  path_ = "/proc/self/fd/" + std::to_string(fd_);
  resident_.assign(pieces_.size(), true);
  reads_.resize(pieces_.size());
  writes_.resize(pieces_.size());
  freeAfterWrite_.assign(pieces_.size(), false);
}

OptimizerSwapper::~OptimizerSwapper() {
  for (auto& f : reads_)
    if (f.valid()) f.wait();
  for (auto& f : writes_)
    if (f.valid()) f.wait();
  if (fd_ >= 0) close(fd_);
}

void OptimizerSwapper::startRead(size_t g) {
  if (resident_[g] || reads_[g].valid()) return;
  // pieces_ never changes after construction: the task may read it in place.
  reads_[g] = std::async(std::launch::async, [this, g] {
    for (const Piece& p : pieces_[g]) engine_->read(path_, p.at, p.bytes, p.offset);
  });
}

void OptimizerSwapper::writeGroup(size_t g) const {
  for (const Piece& p : pieces_[g]) engine_->write(path_, p.at, p.bytes, p.offset);
}

void OptimizerSwapper::waitRead(size_t g) {
  if (resident_[g]) return;
  startRead(g);
  reads_[g].get();
  resident_[g] = true;
}

void OptimizerSwapper::waitWrite(size_t g) {
  if (!writes_[g].valid()) return;
  writes_[g].get();
  if (freeAfterWrite_[g]) freePages(g);
}

void OptimizerSwapper::freePages(size_t g) {
  for (const Piece& p : pieces_[g]) madvise(p.at, p.bytes, MADV_DONTNEED);
  resident_[g] = false;
  freeAfterWrite_[g] = false;
}

void OptimizerSwapper::swapOutAll() {
  for (size_t g = 0; g < pieces_.size(); ++g) {
    waitWrite(g);
    if (!resident_[g]) continue;
    writeGroup(g);
    freePages(g);
  }
}

void OptimizerSwapper::swapInAll() {
  for (size_t g = 0; g < pieces_.size(); ++g) {
    waitWrite(g);
    waitRead(g);
  }
}

void OptimizerSwapper::acquire(size_t g) {
  waitWrite(g);  // a write of this group still in flight (it was just released)
  waitRead(g);
  if (g + 1 < pieces_.size()) {
    waitWrite(g + 1);
    startRead(g + 1);  // overlapped with this group's update
  }
}

void OptimizerSwapper::release(size_t g, bool freeEarly) {
  writes_[g] = std::async(std::launch::async, [this, g] { writeGroup(g); });
  freeAfterWrite_[g] = freeEarly;
  if (g >= 2) waitWrite(g - 2);  // at most three groups in memory while streaming
}

void OptimizerSwapper::endStep() {
  for (size_t g = 0; g < pieces_.size(); ++g) {
    waitWrite(g);
    if (resident_[g]) freePages(g);
  }
  // The next step's first group comes in while the next forward and backward passes run.
  if (!pieces_.empty()) startRead(0);
}

}  // namespace ds::runtime
