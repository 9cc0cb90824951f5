// Segment layout: Header (one cache line per rank for its arrival counter, then pids), then two
// buffer sets of (size input slots + 1 result), each chunkBytes, cache-line aligned.
#include "runtime/comm/shm_communicator.h"

#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <thread>

#include "runtime/common/error.h"

namespace ds::runtime {
namespace {

constexpr size_t kCacheLine = 64;
constexpr int kMaxRanks = 256;
constexpr uint64_t kMagic = 0x64732d73686d3031;  // "ds-shm01"

struct alignas(kCacheLine) Arrival {
  std::atomic<uint64_t> count;
};

// A zombie counts as dead: it will never arrive, whoever is slow to reap it.
bool processGone(int pid) {
  if (kill(pid, 0) != 0) return errno == ESRCH;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), {});
  const auto close = text.rfind(')');
  return close != std::string::npos && close + 2 < text.size() &&
         (text[close + 2] == 'Z' || text[close + 2] == 'X');
}

size_t alignUp(size_t value, size_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

}  // namespace

struct ShmCommunicator::Header {
  std::atomic<uint64_t> magic;
  int32_t size;
  uint64_t chunkBytes;
  alignas(kCacheLine) Arrival arrivals[kMaxRanks];
  std::atomic<int32_t> pids[kMaxRanks];
};

static_assert(std::atomic<uint64_t>::is_always_lock_free, "shared-memory atomics need lock-free");

size_t ShmCommunicator::segmentBytes(int size, const ShmOptions& options) {
  return alignUp(sizeof(Header), kCacheLine) +
         2 * static_cast<size_t>(size + 1) * alignUp(options.chunkBytes, kCacheLine);
}

ShmCommunicator::ShmCommunicator(ShmSegment segment, int rank, int size, const ShmOptions& options)
    : segment_(std::move(segment)), rank_(rank), size_(size), options_(options) {
  if (size < 1 || size > kMaxRanks || rank < 0 || rank >= size)
    throw Error("shared-memory group: rank " + std::to_string(rank) + " of " +
                std::to_string(size) + " (1.." + std::to_string(kMaxRanks) + " ranks)");
  if (options.chunkBytes < kCacheLine * static_cast<size_t>(size))
    throw Error("shared-memory group: chunkBytes " + std::to_string(options.chunkBytes) +
                " is too small for " + std::to_string(size) + " ranks");
  if (segment_.size() < segmentBytes(size, options))
    throw Error("shared memory " + segment_.name() + ": " + std::to_string(segment_.size()) +
                " bytes, the group needs " + std::to_string(segmentBytes(size, options)));
  chunkFloats_ = options.chunkBytes / sizeof(float);
  Header* h = header();
  if (rank == 0) {
    h->size = size;
    h->chunkBytes = options.chunkBytes;
    for (int r = 0; r < kMaxRanks; ++r) h->arrivals[r].count.store(0, std::memory_order_relaxed);
    h->magic.store(kMagic, std::memory_order_release);
  } else {
    const auto deadline = std::chrono::steady_clock::now() + options.timeout;
    while (h->magic.load(std::memory_order_acquire) != kMagic) {
      if (std::chrono::steady_clock::now() > deadline)
        throw TimeoutError("shared memory " + segment_.name() + ": rank 0 never initialised it");
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    if (h->size != size || h->chunkBytes != options.chunkBytes)
      throw Error("shared memory " + segment_.name() + ": made for " + std::to_string(h->size) +
                  " ranks, joined as one of " + std::to_string(size));
  }
  h->pids[rank].store(getpid(), std::memory_order_release);
}

ShmCommunicator ShmCommunicator::join(Store& store, const std::string& key, int rank, int size,
                                      const ShmOptions& options) {
  if (rank == 0) {
    ShmSegment segment = ShmSegment::create(uniqueShmName("group"), segmentBytes(size, options));
    const std::string name = segment.name();
    ShmCommunicator communicator(std::move(segment), rank, size, options);
    store.set(key, name);
    communicator.barrier();  // everyone has it open: the name can go
    communicator.segment_.unlinkName();
    return communicator;
  }
  ShmCommunicator communicator(ShmSegment::open(store.get(key, options.timeout)), rank, size,
                               options);
  communicator.barrier();
  return communicator;
}

ShmCommunicator::Header* ShmCommunicator::header() const {
  return static_cast<Header*>(segment_.data());
}

float* ShmCommunicator::slot(int set, int rank) const {
  char* base = static_cast<char*>(segment_.data()) + alignUp(sizeof(Header), kCacheLine);
  const size_t stride = alignUp(options_.chunkBytes, kCacheLine);
  return reinterpret_cast<float*>(base + (static_cast<size_t>(set) * (size_ + 1) + rank) * stride);
}

float* ShmCommunicator::result(int set) const { return slot(set, size_); }

void ShmCommunicator::sync(const char* op) {
  Header* h = header();
  const uint64_t target = ++syncs_;
  h->arrivals[rank_].count.store(target, std::memory_order_release);
  // More ranks than cores: spinning only delays the peer we wait for, so yield at once.
  static const int cores = static_cast<int>(std::thread::hardware_concurrency());
  const int spinLimit = size_ <= cores ? 2000 : 0;
  const auto started = std::chrono::steady_clock::now();
  auto nextCheck = started + std::chrono::milliseconds(20);
  bool sleeping = false;
  for (int spins = 0;; ++spins) {
    int missing = -1;
    for (int r = 0; r < size_ && missing < 0; ++r)
      if (h->arrivals[r].count.load(std::memory_order_acquire) < target) missing = r;
    if (missing < 0) return;
    if (spins < spinLimit) continue;  // peers on their own cores arrive within microseconds
    // A peer that is late is busy elsewhere (another node's collective, its own compute): after a
    // short while stop competing for the CPU with it and sleep between checks.
    if (sleeping)
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    else
      sched_yield();
    if (!sleeping && spins % 64 != 0) continue;
    const auto now = std::chrono::steady_clock::now();
    if (!sleeping && now - started > std::chrono::microseconds(200)) sleeping = true;
    if (now < nextCheck) continue;
    nextCheck = now + std::chrono::milliseconds(20);
    std::string dead, late;
    for (int r = 0; r < size_; ++r) {
      if (h->arrivals[r].count.load(std::memory_order_acquire) >= target) continue;
      const int pid = h->pids[r].load(std::memory_order_acquire);
      if (pid > 0 && processGone(pid))
        dead +=
            (dead.empty() ? "" : ", ") + std::to_string(r) + " (pid " + std::to_string(pid) + ")";
      late += (late.empty() ? "" : ", ") + std::to_string(r);
    }
    if (!dead.empty())
      throw Error(std::string("shared-memory ") + op + " on rank " + std::to_string(rank_) +
                  ": rank " + dead + " died");
    if (now - started > options_.timeout)
      throw TimeoutError(std::string("shared-memory ") + op + " on rank " + std::to_string(rank_) +
                         ": rank " + late + " did not arrive within " +
                         std::to_string(options_.timeout.count()) + " ms");
  }
}

void ShmCommunicator::allReduce(float* data, size_t count, ReduceOp op) {
  if (size_ == 1) return;
  for (size_t offset = 0; offset < count; offset += chunkFloats_) {
    const size_t n = std::min(chunkFloats_, count - offset);
    const int set = static_cast<int>(chunks_++ % 2);
    std::memcpy(slot(set, rank_), data + offset, n * sizeof(float));
    sync("all_reduce");
    // This rank's share of the chunk, in whole cache lines so no two ranks write one line.
    constexpr size_t kLine = kCacheLine / sizeof(float);
    const size_t share = (n + size_ - 1) / size_;
    const size_t begin = std::min(n, (share * rank_ + kLine - 1) / kLine * kLine);
    const size_t end =
        rank_ == size_ - 1 ? n : std::min(n, (share * (rank_ + 1) + kLine - 1) / kLine * kLine);
    float* out = result(set);
    const float* first = slot(set, 0);
    const float* second = slot(set, 1);
    if (op == ReduceOp::Max) {
      for (size_t i = begin; i < end; ++i) out[i] = std::max(first[i], second[i]);
      for (int r = 2; r < size_; ++r) {
        const float* in = slot(set, r);
        for (size_t i = begin; i < end; ++i) out[i] = std::max(out[i], in[i]);
      }
    } else {
      for (size_t i = begin; i < end; ++i) out[i] = first[i] + second[i];
      for (int r = 2; r < size_; ++r) {
        const float* in = slot(set, r);
        for (size_t i = begin; i < end; ++i) out[i] += in[i];
      }
      if (op == ReduceOp::Avg) {
        const float scale = 1.0f / static_cast<float>(size_);
        for (size_t i = begin; i < end; ++i) out[i] *= scale;
      }
    }
    sync("all_reduce");
    std::memcpy(data + offset, out, n * sizeof(float));
  }
}

void ShmCommunicator::allGather(const float* in, float* out, size_t countPerRank) {
  if (size_ == 1) {
    std::memmove(out, in, countPerRank * sizeof(float));
    return;
  }
  for (size_t offset = 0; offset < countPerRank; offset += chunkFloats_) {
    const size_t n = std::min(chunkFloats_, countPerRank - offset);
    const int set = static_cast<int>(chunks_++ % 2);
    std::memcpy(slot(set, rank_), in + offset, n * sizeof(float));
    sync("all_gather");
    for (int r = 0; r < size_; ++r)
      std::memcpy(out + r * countPerRank + offset, slot(set, r), n * sizeof(float));
  }
}

void ShmCommunicator::reduceScatterSum(const float* in, float* out, size_t countPerRank) {
  if (size_ == 1) {
    std::memmove(out, in, countPerRank * sizeof(float));
    return;
  }
  // A slot holds one piece of every block; rank r then sums piece r of every slot straight
  // into `out` (no result buffer), in rank order.
  const size_t piece = std::max<size_t>(1, chunkFloats_ / size_);
  for (size_t offset = 0; offset < countPerRank; offset += piece) {
    const size_t n = std::min(piece, countPerRank - offset);
    const int set = static_cast<int>(chunks_++ % 2);
    float* mine = slot(set, rank_);
    for (int b = 0; b < size_; ++b)
      std::memcpy(mine + b * piece, in + b * countPerRank + offset, n * sizeof(float));
    sync("reduce_scatter");
    float* target = out + offset;
    const float* first = slot(set, 0) + rank_ * piece;
    const float* second = slot(set, 1) + rank_ * piece;
    for (size_t i = 0; i < n; ++i) target[i] = first[i] + second[i];
    for (int r = 2; r < size_; ++r) {
      const float* from = slot(set, r) + rank_ * piece;
      for (size_t i = 0; i < n; ++i) target[i] += from[i];
    }
  }
}

void ShmCommunicator::broadcast(float* data, size_t count, int root) {
  if (root < 0 || root >= size_)
    throw Error("broadcast: root " + std::to_string(root) + " is not a rank of this group of " +
                std::to_string(size_));
  if (size_ == 1) return;
  for (size_t offset = 0; offset < count; offset += chunkFloats_) {
    const size_t n = std::min(chunkFloats_, count - offset);
    const int set = static_cast<int>(chunks_++ % 2);
    if (rank_ == root) std::memcpy(slot(set, 0), data + offset, n * sizeof(float));
    sync("broadcast");
    if (rank_ != root) std::memcpy(data + offset, slot(set, 0), n * sizeof(float));
  }
}

void ShmCommunicator::barrier() { sync("barrier"); }

}  // namespace ds::runtime
