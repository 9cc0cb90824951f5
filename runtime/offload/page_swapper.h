// PageSwapper: NVMe offload of arrays that keep their addresses. Between uses the pages of each
// group of arrays are written to a swap file and given back to the OS (MADV_DONTNEED); a use brings
// them back. Two users:
//   offload_optimizer nvme (Engine): groups are optimizer sub-groups (master slices and moments),
//     streamed at each step: acquire(g) waits for g and starts reading g + 1, release(g) writes g
//     back, endStep frees what is left and starts reading group 0 for the next step.
//   offload_param nvme (ZeroStage3): groups are layers' shards of the working parameters, fetched
//     right before their all-gather and dropped after (the file already holds them: no write),
//     written out once after each optimizer step.
// The swap file is unlinked as soon as it is created, so it disappears with the process however it
// ends, and a later job can never read it. The space is reserved up front (fallocate): a full disk
// is an error before training, naming the directory and the bytes needed. Groups are added one at
// a time and swapped out at once, so the whole state is never resident, not even while it is built.
// Only the page-aligned interior of an array is swapped; its ragged ends stay in memory.
// Not thread-safe: one thread at a time (the stage's gathers all run on the communication queue).
#pragma once

#include <cstddef>
#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "runtime/offload/aio_engine.h"

namespace ds::runtime {

class PageSwapper {
 public:
  struct Region {
    void* data;
    size_t bytes;
  };
  // `what` names the config block in errors ("offload_optimizer"); the swap file is
  // DIRECTORY/.ds-<stem>-swap-PID-rankR until it is unlinked. Reserves `reserveBytes` (at least
  // the bytes of every region to come).
  PageSwapper(const AioConfig& aio, const std::string& directory, int rank, uint64_t reserveBytes,
              std::string what, const std::string& stem);
  ~PageSwapper();
  PageSwapper(const PageSwapper&) = delete;
  PageSwapper& operator=(const PageSwapper&) = delete;

  // The regions of the next group, resident and initialised: written to the file, then their pages
  // are given back. Returns the group's index.
  size_t addGroup(const std::vector<Region>& regions);
  size_t groupCount() const { return pieces_.size(); }

  void swapOutAll();  // write every resident group, then give its pages back
  void swapInAll();   // read every swapped-out group (checkpoints, inspection)

  // Streaming (offload_optimizer): see the header comment. freeEarly: the group's pages go back
  // once written, else at endStep.
  void acquire(size_t g);
  void release(size_t g, bool freeEarly);
  void endStep();

  // Use in place (offload_param): fetch reads the group unless resident; dropClean gives its pages
  // back without writing, for a group not modified since it was last written.
  void fetch(size_t g);
  void dropClean(size_t g);
  // The caller rewrote every byte of every group (given-back pages included): all count as
  // resident, so that swapOutAll writes them.
  void markAllResident();

  size_t fileBytes() const { return fileBytes_; }
  const char* engineName() const { return engine_->name(); }

  // The directory's free space against `bytes`; throws ds::Error naming both (`what`: the config
  // block, for the message).
  static void checkSpace(const std::string& directory, uint64_t bytes,
                         const std::string& what = "offload_optimizer");

 private:
  struct Piece {
    char* at;
    size_t bytes;
    uint64_t offset;  // in the swap file
  };
  void startRead(size_t g);
  void writeGroup(size_t g) const;
  void waitRead(size_t g);
  void waitWrite(size_t g);
  void freePages(size_t g);

  std::string what_;
  std::unique_ptr<AioEngine> engine_;
  std::string path_;  // /proc/self/fd/N of the unlinked swap file
  int fd_ = -1;
  std::vector<std::vector<Piece>> pieces_;
  std::vector<uint8_t> resident_, freeAfterWrite_;  // bytes, not vector<bool>'s shared bits
  std::vector<std::future<void>> reads_, writes_;
  uint64_t fileBytes_ = 0;  // used by the groups so far
  uint64_t reservedBytes_ = 0;
};

}  // namespace ds::runtime
