// OptimizerSwapper: NVMe offload of one rank's optimizer state. The state stays where the optimizer
// allocated it (the same addresses), but between steps its pages are written to a swap file and
// given back to the OS (MADV_DONTNEED); a step brings each sub-group back just before its update
// (the next one is read while the current one is updated) and writes it out after. The swap file
// is unlinked as soon as it is created, so it disappears with the process however it ends, and a
// later job can never read it. The space is reserved up front (fallocate): a full disk is an error
// before training, naming the directory and the bytes needed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "runtime/offload/aio_engine.h"

namespace ds::runtime {

class OptimizerSwapper {
 public:
  struct Array {
    float* data;
    size_t count;
  };
  // groups[g]: the arrays of optimizer sub-group g (master weights, moments...). All resident.
  OptimizerSwapper(const AioConfig& aio, const std::string& directory, int rank,
                   std::vector<std::vector<Array>> groups);
  ~OptimizerSwapper();
  OptimizerSwapper(const OptimizerSwapper&) = delete;
  OptimizerSwapper& operator=(const OptimizerSwapper&) = delete;

  void swapOutAll();  // write every resident group, then give its pages back
  void swapInAll();   // read every swapped-out group (checkpoints, inspection)

  // The step: acquire(g) before group g's update (waits for its read, starts reading g + 1),
  // release(g) after (starts writing it; `freeEarly`: its pages go back once written, else at
  // endStep). endStep waits for every write, gives the rest back and starts reading group 0 for
  // the next step (overlapped with its forward and backward passes).
  void acquire(size_t g);
  void release(size_t g, bool freeEarly);
  void endStep();

  size_t fileBytes() const { return fileBytes_; }
  const char* engineName() const { return engine_->name(); }

  // The directory's free space against `bytes`; throws ds::Error naming both.
  static void checkSpace(const std::string& directory, uint64_t bytes);

 private:
  // The page-aligned interior of an array: what goes to the file (the ragged ends stay resident).
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

  std::unique_ptr<AioEngine> engine_;
  std::string path_;  // /proc/self/fd/N of the unlinked swap file
  int fd_ = -1;
  std::vector<std::vector<Piece>> pieces_;
  std::vector<bool> resident_;
  std::vector<std::future<void>> reads_, writes_;
  std::vector<bool> freeAfterWrite_;
  uint64_t fileBytes_ = 0;
};

}  // namespace ds::runtime
