// SwapFile: one rank's swap file for an offload, and the async I/O engine that moves bytes to and
// from it. The file is unlinked as soon as it is created, so it disappears with the process however
// it ends and a later job can never read it; it is reached through /proc/self/fd. Its space is
// reserved up front (fallocate): a full disk is an error before training, naming the directory and
// the bytes needed. Users lay their data out in it with allocate(). Used by ParamSwapper
// (offload_param) and SlotSwapper (offload_optimizer).
// Every write is checksummed as it goes (CRC32C per 1 MiB piece, kept in memory) and every read of
// what was written is checked against it, so a file changed under the job (overwritten through
// /proc, a device returning other data) stops it naming the file and offset instead of training on
// garbage until the gradient norm turns NaN. DeepSpeed's swapper has no such check.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/offload/aio_engine.h"

namespace ds::runtime {

// An array to offload: its own storage.
struct SwapRegion {
  void* data;
  size_t bytes;
};

// The pages wholly inside [data, data + bytes): what can be swapped out and given back (bytes 0
// when there is no whole page); the ragged ends around them stay in memory.
SwapRegion wholePages(void* data, size_t bytes);
// Gives wholePages(data, bytes) back to the OS (MADV_DONTNEED: they read as zeros when touched
// again).
void givePagesBack(void* data, size_t bytes);
// Zeroes [data, data + bytes) of private anonymous memory (any heap allocation) touching only its
// ragged ends: the whole pages are given back and read as zeros when first written, so a large
// zeroed buffer costs no memory until used.
void zeroUntouched(void* data, size_t bytes);
// Asks for transparent huge pages over the 2 MiB-aligned interior of [data, data + bytes): an
// array whose pages are given back and faulted in again each step (an offloaded home) then
// costs a fault per 2 MiB instead of per 4 KiB.
void preferHugePages(void* data, size_t bytes);

// Whether swap files created from now on checksum their transfers (on unless a benchmark turns
// them off to measure what they cost).
void setSwapChecksums(bool on);

class SwapFile {
 public:
  // `what` names the config block in errors ("offload_optimizer"); the file is
  // DIRECTORY/.ds-<stem>-swap-PID-rankR until it is unlinked.
  SwapFile(const AioConfig& aio, const std::string& directory, int rank, uint64_t reserveBytes,
           std::string what, const std::string& stem);
  ~SwapFile();
  SwapFile(const SwapFile&) = delete;
  SwapFile& operator=(const SwapFile&) = delete;

  // The offset of the next `bytes` (a multiple of 4096) of the file; throws when they pass the
  // reservation (a bug: it must cover everything).
  uint64_t allocate(uint64_t bytes);
  uint64_t usedBytes() const { return usedBytes_; }

  // Blocking whole transfers; buffer, bytes and offset multiples of 4096 (O_DIRECT). An I/O error
  // names the swap file by its (unlinked) name, the offset and the errno. A read of exactly what
  // one earlier write wrote (the same offset and size, as every swapper reads) is verified against
  // that write's checksums; a mismatch names the file and the offset of the first bad piece.
  // Thread-safe for transfers of different regions.
  void read(void* buffer, size_t bytes, uint64_t offset) const;
  void write(const void* buffer, size_t bytes, uint64_t offset) const;

  const std::string& what() const { return what_; }
  const char* engineName() const { return engine_->name(); }

  // The directory's free space against `bytes`; throws ds::Error naming both (`what`: the config
  // block, for the message).
  static void checkSpace(const std::string& directory, uint64_t bytes, const std::string& what);

 private:
  std::string what_;
  std::unique_ptr<AioEngine> engine_;
  std::string path_;  // /proc/self/fd/N: what the engine opens
  std::string name_;  // the file's name before it was unlinked: what errors say
  int fd_ = -1;
  uint64_t usedBytes_ = 0, reservedBytes_ = 0;
  // What each write left at its offset: its size and one CRC32C per piece.
  struct Written {
    size_t bytes = 0;
    std::vector<uint32_t> pieces;
  };
  bool checksums_;
  mutable std::mutex writtenMutex_;
  mutable std::unordered_map<uint64_t, Written> written_;
  void verify(const void* buffer, size_t bytes, uint64_t offset) const;
};

}  // namespace ds::runtime
