// Segment layout: Header (one cache line per rank for its arrival counter, then pids), two buffer
// sets of (size input slots + 1 result), each chunkBytes, then size x size send/recv channels
// (counters on their own cache lines, two pieces each). Everything cache-line aligned.
#include "runtime/comm/shm_communicator.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>

#include "common/error.h"
#include "common/usable_cores.h"
#include "runtime/comm/elementwise_reduce.h"

namespace ds::runtime {
namespace {

constexpr size_t kCacheLine = 64;
constexpr int kMaxRanks = 256;
constexpr uint64_t kMagic = 0x64732d73686d3032;  // "ds-shm02"

struct alignas(kCacheLine) Counter {
  std::atomic<uint64_t> value;
};

// A zombie counts as dead: it will never arrive, whoever is slow to reap it.
// A process that ends between the two checks is gone too: reading its /proc file then fails
// with ESRCH (through an ifstream, libstdc++ throws on that read).
bool processGone(int pid) {
  if (kill(pid, 0) != 0) return errno == ESRCH;
  const int fd = ::open(("/proc/" + std::to_string(pid) + "/stat").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT || errno == ESRCH;
  char buffer[512];
  const ssize_t n = ::read(fd, buffer, sizeof(buffer));
  const int readErrno = errno;
  ::close(fd);
  if (n < 0) return readErrno == ESRCH;
  const std::string text(buffer, static_cast<size_t>(n));
  const auto close = text.rfind(')');
  return close != std::string::npos && close + 2 < text.size() &&
         (text[close + 2] == 'Z' || text[close + 2] == 'X');
}

size_t alignUp(size_t value, size_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

// send/recv pieces: 32 KiB, less when many ranks would make the size x size channels big (the
// segment is reserved in /dev/shm up front): at most 32 MiB in all, at least 4 KiB a piece.
size_t channelPieceBytes(int size) {
  const size_t pairs = static_cast<size_t>(size) * static_cast<size_t>(size);
  return std::clamp<size_t>((size_t{32} << 20) / (2 * pairs) / kCacheLine * kCacheLine, 4096,
                            32768);
}

// This rank's share [begin, end) of n elements, in whole cache lines so no two ranks write one.
std::pair<size_t, size_t> shareOf(size_t n, int rank, int size, size_t elementBytes) {
  const size_t line = kCacheLine / elementBytes;
  const size_t share = (n + size - 1) / size;
  const size_t begin = std::min(n, (share * rank + line - 1) / line * line);
  const size_t end =
      rank == size - 1 ? n : std::min(n, (share * (rank + 1) + line - 1) / line * line);
  return {begin, end};
}

}  // namespace

struct ShmCommunicator::Header {
  std::atomic<uint64_t> magic;
  int32_t size;
  uint64_t chunkBytes;
  Counter arrivals[kMaxRanks];
  std::atomic<int32_t> pids[kMaxRanks];
};

// Written by the sender: `sent` and the byte count of the message each piece belongs to; by the
// receiver: `taken`. Piece k lives in half k % 2.
struct ShmCommunicator::Channel {
  Counter sent;
  Counter taken;
  alignas(kCacheLine) uint64_t messageBytes[2];
};

static_assert(std::atomic<uint64_t>::is_always_lock_free, "shared-memory atomics need lock-free");

size_t ShmCommunicator::segmentBytes(int size, const ShmOptions& options) {
  const size_t channelBytes = sizeof(Channel) + 2 * channelPieceBytes(size);
  return alignUp(sizeof(Header), kCacheLine) +
         2 * static_cast<size_t>(size + 1) * alignUp(options.chunkBytes, kCacheLine) +
         static_cast<size_t>(size) * static_cast<size_t>(size) * channelBytes;
}

ShmCommunicator::ShmCommunicator(std::shared_ptr<ShmSegment> segment, int rank, int size,
                                 const ShmOptions& options)
    : segment_(std::move(segment)), rank_(rank), size_(size), options_(options) {
  if (size < 1 || size > kMaxRanks || rank < 0 || rank >= size)
    throw Error(where() + " group: rank " + std::to_string(rank) + " of " + std::to_string(size) +
                " (1.." + std::to_string(kMaxRanks) + " ranks)");
  if (options.chunkBytes < kCacheLine * static_cast<size_t>(size) || options.chunkBytes % 4 != 0)
    throw Error(where() + " group: chunkBytes " + std::to_string(options.chunkBytes) +
                " is too small for " + std::to_string(size) + " ranks (or not a multiple of 4)");
  if (segment_->size() < segmentBytes(size, options))
    throw Error(where() + " memory " + segment_->name() + ": " + std::to_string(segment_->size()) +
                " bytes, the group needs " + std::to_string(segmentBytes(size, options)));
  pieceBytes_ = channelPieceBytes(size);
  sent_.assign(size, 0);
  received_.assign(size, 0);
  Header* h = header();
  if (rank == 0) {
    h->size = size;
    h->chunkBytes = options.chunkBytes;
    for (int r = 0; r < kMaxRanks; ++r) h->arrivals[r].value.store(0, std::memory_order_relaxed);
    for (int from = 0; from < size; ++from)
      for (int to = 0; to < size; ++to) {
        channel(from, to)->sent.value.store(0, std::memory_order_relaxed);
        channel(from, to)->taken.value.store(0, std::memory_order_relaxed);
      }
    h->magic.store(kMagic, std::memory_order_release);
  } else {
    const auto deadline = std::chrono::steady_clock::now() + options.timeout;
    while (h->magic.load(std::memory_order_acquire) != kMagic) {
      if (std::chrono::steady_clock::now() > deadline)
        throw TimeoutError(where() + " memory " + segment_->name() +
                           ": rank 0 never initialised it");
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    if (h->size != size || h->chunkBytes != options.chunkBytes)
      throw Error(where() + " memory " + segment_->name() + ": made for " +
                  std::to_string(h->size) + " ranks, joined as one of " + std::to_string(size));
  }
  h->pids[rank].store(getpid(), std::memory_order_release);
}

ShmCommunicator ShmCommunicator::join(Store& store, const std::string& key, int rank, int size,
                                      const ShmOptions& options) {
  if (rank == 0) {
    auto segment = std::make_shared<ShmSegment>(
        ShmSegment::create(uniqueShmName("group"), segmentBytes(size, options)));
    ShmCommunicator communicator(segment, rank, size, options);
    store.set(key, segment->name());
    communicator.barrier();  // everyone has it open: the name can go
    segment->unlinkName();
    return communicator;
  }
  ShmCommunicator communicator(
      std::make_shared<ShmSegment>(ShmSegment::open(store.get(key, options.timeout))), rank, size,
      options);
  communicator.barrier();
  return communicator;
}

std::vector<ShmCommunicator> ShmCommunicator::inProcessGroup(int size, const ShmOptions& options) {
  auto segment = std::make_shared<ShmSegment>(ShmSegment::anonymous(segmentBytes(size, options)));
  std::vector<ShmCommunicator> group;
  group.reserve(size);
  for (int r = 0; r < size; ++r) group.emplace_back(segment, r, size, options);
  return group;
}

std::string ShmCommunicator::backendName() const {
  return segment_->name().empty() ? "in-process" : "shared memory";
}

std::string ShmCommunicator::where() const {
  return segment_ && segment_->name().empty() ? "in-process" : "shared-memory";
}

ShmCommunicator::Header* ShmCommunicator::header() const {
  return static_cast<Header*>(segment_->data());
}

char* ShmCommunicator::slot(int set, int rank) const {
  char* base = static_cast<char*>(segment_->data()) + alignUp(sizeof(Header), kCacheLine);
  const size_t stride = alignUp(options_.chunkBytes, kCacheLine);
  return base + (static_cast<size_t>(set) * (size_ + 1) + rank) * stride;
}

char* ShmCommunicator::result(int set) const { return slot(set, size_); }

ShmCommunicator::Channel* ShmCommunicator::channel(int from, int to) const {
  char* base = slot(2, 0);  // just past both buffer sets
  const size_t stride = sizeof(Channel) + 2 * channelPieceBytes(size_);
  return reinterpret_cast<Channel*>(base + (static_cast<size_t>(from) * size_ + to) * stride);
}

char* ShmCommunicator::piece(Channel* channel, uint64_t sequence) const {
  return reinterpret_cast<char*>(channel + 1) + (sequence % 2) * pieceBytes_;
}

template <typename Pending>
void ShmCommunicator::waitFor(const char* op, int first, int last, Pending pending) const {
  // More ranks than cores: spinning only delays the peer we wait for, so yield at once.
  static const int cores = usableCores();
  const int spinLimit = size_ <= cores ? 2000 : 0;
  const auto started = std::chrono::steady_clock::now();
  auto nextCheck = started + std::chrono::milliseconds(20);
  bool sleeping = false;
  auto nap = std::chrono::microseconds(20);
  for (int spins = 0;; ++spins) {
    bool waiting = false;
    for (int r = first; r < last && !waiting; ++r) waiting = pending(r);
    if (!waiting) return;
    if (spins < spinLimit) continue;  // peers on their own cores arrive within microseconds
    // A peer that is late is busy elsewhere (another node's collective, its own compute): after a
    // short while stop competing for the CPU with it and sleep between checks, longer the longer
    // the wait (a sixteenth of it, up to 1 ms: a late wake-up costs at most ~6% of the wait),
    // since 20 us naps cost a waiting rank a tenth of a core: while rank 0 saves a checkpoint or
    // measures the sgemm peak, its peers' naps took that from it.
    if (sleeping)
      std::this_thread::sleep_for(nap);
    else
      sched_yield();
    if (!sleeping && spins % 64 != 0) continue;
    const auto now = std::chrono::steady_clock::now();
    if (!sleeping && now - started > std::chrono::microseconds(200)) sleeping = true;
    nap = std::clamp(std::chrono::duration_cast<std::chrono::microseconds>(now - started) / 16,
                     std::chrono::microseconds(20), std::chrono::microseconds(1000));
    if (now < nextCheck) continue;
    nextCheck = now + std::chrono::milliseconds(20);
    std::string dead, late;
    for (int r = first; r < last; ++r) {
      if (!pending(r)) continue;
      const int pid = header()->pids[r].load(std::memory_order_acquire);
      if (pid > 0 && processGone(pid))
        dead +=
            (dead.empty() ? "" : ", ") + std::to_string(r) + " (pid " + std::to_string(pid) + ")";
      late += (late.empty() ? "" : ", ") + std::to_string(r);
    }
    if (!dead.empty())
      throw Error(where() + " " + op + " on rank " + std::to_string(rank_) + ": rank " + dead +
                  " died");
    if (now - started > options_.timeout)
      throw TimeoutError(where() + " " + op + " on rank " + std::to_string(rank_) + ": rank " +
                         late + " did not answer within " +
                         std::to_string(options_.timeout.count()) + " ms");
  }
}

void ShmCommunicator::sync(const char* op) {
  Header* h = header();
  const uint64_t target = ++syncs_;
  h->arrivals[rank_].value.store(target, std::memory_order_release);
  waitFor(op, 0, size_,
          [&](int r) { return h->arrivals[r].value.load(std::memory_order_acquire) < target; });
}

void ShmCommunicator::doAllReduce(void* data, size_t count, DType dtype, ReduceOp op) {
  const size_t bytes = dtypeBytes(dtype);
  const size_t chunk = options_.chunkBytes / bytes;
  const void* inputs[kMaxRanks];
  for (size_t offset = 0; offset < count; offset += chunk) {
    const size_t n = std::min(chunk, count - offset);
    const int set = static_cast<int>(chunks_++ % 2);
    const auto [begin, end] = shareOf(n, rank_, size_, bytes);
    char* mine = static_cast<char*>(data) + offset * bytes;
    char* slotMine = slot(set, rank_);
    char* out = result(set);
    // Peers read every share but their own; this rank reduces its share from `mine` directly.
    std::memcpy(slotMine, mine, begin * bytes);
    std::memcpy(slotMine + end * bytes, mine + end * bytes, (n - end) * bytes);
    sync("all_reduce");
    for (int r = 0; r < size_; ++r) inputs[r] = (r == rank_ ? mine : slot(set, r)) + begin * bytes;
    reduceElements(out + begin * bytes, inputs, size_, end - begin, dtype, op, size_);
    std::memcpy(mine + begin * bytes, out + begin * bytes, (end - begin) * bytes);
    sync("all_reduce");
    std::memcpy(mine, out, begin * bytes);
    std::memcpy(mine + end * bytes, out + end * bytes, (n - end) * bytes);
  }
}

void ShmCommunicator::doAllGather(const void* in, void* out, size_t countPerRank, DType dtype) {
  const size_t bytes = dtypeBytes(dtype);
  const size_t chunk = options_.chunkBytes / bytes;
  const char* from = static_cast<const char*>(in);
  char* to = static_cast<char*>(out);
  const size_t block = countPerRank * bytes;
  // A set is rewritten two rounds later, after a sync every rank passes only once it has read
  // the set: one sync per round is enough.
  for (size_t offset = 0; offset < countPerRank; offset += chunk) {
    const size_t n = std::min(chunk, countPerRank - offset) * bytes;
    const int set = static_cast<int>(chunks_++ % 2);
    std::memcpy(slot(set, rank_), from + offset * bytes, n);
    sync("all_gather");
    for (int r = 0; r < size_; ++r)
      std::memcpy(to + r * block + offset * bytes,
                  r == rank_ ? from + offset * bytes : slot(set, r), n);
  }
}

void ShmCommunicator::doReduceScatter(const void* in, void* out, size_t countPerRank, DType dtype,
                                      ReduceOp op) {
  const size_t bytes = dtypeBytes(dtype);
  const size_t line = kCacheLine / bytes;
  // A slot holds one piece of every block but this rank's; rank r then reduces piece r of every
  // slot, and of its own input, straight into `out`, in rank order.
  const size_t piece = std::max(line, options_.chunkBytes / bytes / size_ / line * line);
  const char* from = static_cast<const char*>(in);
  const void* inputs[kMaxRanks];
  for (size_t offset = 0; offset < countPerRank; offset += piece) {
    const size_t n = std::min(piece, countPerRank - offset);
    const int set = static_cast<int>(chunks_++ % 2);
    char* mine = slot(set, rank_);
    for (int b = 0; b < size_; ++b)
      if (b != rank_)
        std::memcpy(mine + b * piece * bytes, from + (b * countPerRank + offset) * bytes,
                    n * bytes);
    sync("reduce_scatter");
    for (int r = 0; r < size_; ++r)
      inputs[r] = r == rank_ ? from + (rank_ * countPerRank + offset) * bytes
                             : slot(set, r) + rank_ * piece * bytes;
    reduceElements(static_cast<char*>(out) + offset * bytes, inputs, size_, n, dtype, op, size_);
  }
}

void ShmCommunicator::doBroadcast(void* data, size_t count, DType dtype, int root) {
  const size_t bytes = dtypeBytes(dtype);
  const size_t chunk = options_.chunkBytes / bytes;
  char* base = static_cast<char*>(data);
  for (size_t offset = 0; offset < count; offset += chunk) {
    const size_t n = std::min(chunk, count - offset) * bytes;
    const int set = static_cast<int>(chunks_++ % 2);
    if (rank_ == root) std::memcpy(slot(set, 0), base + offset * bytes, n);
    sync("broadcast");
    if (rank_ != root) std::memcpy(base + offset * bytes, slot(set, 0), n);
  }
}

void ShmCommunicator::doSend(const void* data, size_t count, DType dtype, int peer) {
  Channel* ch = channel(rank_, peer);
  const size_t total = count * dtypeBytes(dtype);
  const char* from = static_cast<const char*>(data);
  size_t offset = 0;
  do {  // a message of 0 bytes is still one piece, so the receiver can check it
    const uint64_t sequence = sent_[peer];
    waitFor("send", peer, peer + 1,
            [&](int) { return ch->taken.value.load(std::memory_order_acquire) + 2 <= sequence; });
    const size_t n = std::min(pieceBytes_, total - offset);
    std::memcpy(piece(ch, sequence), from + offset, n);
    ch->messageBytes[sequence % 2] = total;
    ch->sent.value.store(sequence + 1, std::memory_order_release);
    sent_[peer] = sequence + 1;
    offset += n;
  } while (offset < total);
}

void ShmCommunicator::doRecv(void* data, size_t count, DType dtype, int peer) {
  Channel* ch = channel(peer, rank_);
  const size_t total = count * dtypeBytes(dtype);
  char* to = static_cast<char*>(data);
  size_t offset = 0;
  do {
    const uint64_t sequence = received_[peer];
    waitFor("recv", peer, peer + 1,
            [&](int) { return ch->sent.value.load(std::memory_order_acquire) <= sequence; });
    if (ch->messageBytes[sequence % 2] != total)
      throw Error(where() + " recv on rank " + std::to_string(rank_) + ": rank " +
                  std::to_string(peer) + " sent " + std::to_string(ch->messageBytes[sequence % 2]) +
                  " bytes, this rank expected " + std::to_string(total) +
                  " (send and recv must name the same count and dtype)");
    const size_t n = std::min(pieceBytes_, total - offset);
    std::memcpy(to + offset, piece(ch, sequence), n);
    ch->taken.value.store(sequence + 1, std::memory_order_release);
    received_[peer] = sequence + 1;
    offset += n;
  } while (offset < total);
}

void ShmCommunicator::doBarrier() { sync("barrier"); }

}  // namespace ds::runtime
