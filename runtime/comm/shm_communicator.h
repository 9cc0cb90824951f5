// ShmCommunicator: collectives between ranks on one node through one POSIX shared-memory segment,
// no sockets. all_reduce: every rank copies a chunk of its buffer into its own slot, except its
// own 1/N share, which it reduces straight from its buffer with the peers' slots (so every core
// does part of the arithmetic) into a shared result, which the others copy back. Chunks alternate
// between two buffer sets, so one synchronisation per phase is enough. Reductions run in a fixed
// rank order, so every rank gets bitwise-identical results. send/recv go through one small
// double-buffered channel per ordered pair of ranks. A peer that dies is noticed within
// milliseconds (its pid checked while waiting); one that hangs fails the op after the timeout,
// naming it.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

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

  // The in-process backend: `size` communicators over one anonymous mapping, one per thread (a
  // rank per thread, for tests and single-process tools). No store, no name in /dev/shm.
  static std::vector<ShmCommunicator> inProcessGroup(int size, const ShmOptions& options = {});

  // With a segment already created (segmentBytes) or opened: rank 0's constructor initialises it,
  // so it must be created before the others attach (join does this).
  ShmCommunicator(std::shared_ptr<ShmSegment> segment, int rank, int size,
                  const ShmOptions& options);
  ShmCommunicator(ShmCommunicator&&) noexcept = default;
  ~ShmCommunicator() override = default;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backendName() const override;

 protected:
  void doAllReduce(void* data, size_t count, DType dtype, ReduceOp op) override;
  void doAllGather(const void* in, void* out, size_t countPerRank, DType dtype) override;
  void doReduceScatter(const void* in, void* out, size_t countPerRank, DType dtype,
                       ReduceOp op) override;
  void doBroadcast(void* data, size_t count, DType dtype, int root) override;
  void doSend(const void* data, size_t count, DType dtype, int peer) override;
  void doRecv(void* data, size_t count, DType dtype, int peer) override;
  void doBarrier() override;

 private:
  struct Header;
  struct Channel;
  Header* header() const;
  char* slot(int set, int rank) const;  // a rank's input slot in buffer set 0 or 1
  char* result(int set) const;
  Channel* channel(int from, int to) const;
  char* piece(Channel* channel, uint64_t sequence) const;
  // Marks this rank's arrival at the next synchronisation point and waits for every peer.
  void sync(const char* op);
  // Waits until pending(r) is false for every rank r in [first, last); fails naming the ranks
  // still pending once one of them died or the timeout passed.
  template <typename Pending>
  void waitFor(const char* op, int first, int last, Pending pending) const;
  std::string where() const;  // "shared-memory" or "in-process", for messages

  std::shared_ptr<ShmSegment> segment_;
  int rank_ = 0;
  int size_ = 1;
  ShmOptions options_;
  size_t pieceBytes_ = 0;                  // per half of a send/recv channel
  uint64_t syncs_ = 0;                     // synchronisation points passed, the same on every rank
  uint64_t chunks_ = 0;                    // chunks moved: picks the buffer set
  std::vector<uint64_t> sent_, received_;  // send/recv pieces per peer
};

}  // namespace ds::runtime
