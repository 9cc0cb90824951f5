// ShmCommunicator: collectives between ranks on one node through one POSIX shared-memory segment,
// no sockets. all_reduce: every rank copies a chunk of its buffer into its own slot, then reduces
// its 1/N share of the chunk across all slots (so every core does part of the arithmetic) into a
// shared result, which every rank copies back. Chunks alternate between two buffer sets, so one
// synchronisation per phase is enough. Sums run in a fixed rank order, so every rank gets
// bitwise-identical results. A peer that dies is noticed within milliseconds (its pid checked
// while waiting); one that hangs fails the op after the timeout, naming it.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "runtime/comm/communicator.h"
#include "runtime/comm/shm_segment.h"
#include "runtime/comm/store.h"

namespace ds::runtime {

struct ShmOptions {
  // Per rank slot. Small enough that a chunk is still in cache when it is reduced and copied back
  // (DRAM then sees each rank's buffer read once and written once); measured best at 64K-1M.
  size_t chunkBytes = size_t{256} << 10;
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
};

class ShmCommunicator : public Communicator {
 public:
  // Bytes the segment needs for `size` ranks.
  static size_t segmentBytes(int size, const ShmOptions& options);

  // Every rank of the group calls this with the same key: rank 0 creates the segment and publishes
  // its name in the store, the others open it; the name is unlinked once all are attached.
  static ShmCommunicator join(Store& store, const std::string& key, int rank, int size,
                              const ShmOptions& options = {});

  // With a segment already created (segmentBytes) or opened: rank 0's constructor initialises it,
  // so it must be created before the others attach (join does this).
  ShmCommunicator(ShmSegment segment, int rank, int size, const ShmOptions& options);
  ShmCommunicator(ShmCommunicator&&) noexcept = default;
  ~ShmCommunicator() override = default;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void allReduce(float* data, size_t count, ReduceOp op) override;
  void allGather(const float* in, float* out, size_t countPerRank) override;
  void reduceScatterSum(const float* in, float* out, size_t countPerRank) override;
  void broadcast(float* data, size_t count, int root) override;
  void barrier() override;

 private:
  struct Header;
  Header* header() const;
  float* slot(int set, int rank) const;  // a rank's input slot in buffer set 0 or 1
  float* result(int set) const;
  // Marks this rank's arrival at the next synchronisation point and waits for every peer.
  void sync(const char* op);

  ShmSegment segment_;
  int rank_ = 0;
  int size_ = 1;
  ShmOptions options_;
  size_t chunkFloats_ = 0;
  uint64_t syncs_ = 0;   // synchronisation points passed, the same on every rank
  uint64_t chunks_ = 0;  // chunks moved: picks the buffer set
};

}  // namespace ds::runtime
