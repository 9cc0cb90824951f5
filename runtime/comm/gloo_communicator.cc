// GlooCommunicator: connects a full mesh through the store, then runs Gloo collectives and rings.
#include "runtime/comm/gloo_communicator.h"

#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/math.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include <cstring>

#include "common/error.h"
#include "runtime/comm/check_in.h"
#include "runtime/comm/elementwise_reduce.h"
#include "runtime/comm/gloo_mesh.h"

namespace ds::runtime {
namespace {

// Slot prefixes of our own messages, apart from Gloo's (0x01-0x08) and its algorithm slots.
constexpr uint8_t kPointToPointSlot = 0x40;
constexpr uint8_t kRingSlot = 0x41;
// Ring blocks travel in segments of this size, so reducing one overlaps receiving the next.
constexpr size_t kRingSegmentBytes = size_t{1} << 20;
// How long the ranks that saw a collective fail wait for each other before naming the missing.
constexpr std::chrono::milliseconds kCheckInGrace{3000};

void awaitSend(gloo::transport::UnboundBuffer& buffer, std::chrono::milliseconds timeout) {
  if (!buffer.waitSend(timeout)) throw Error("send aborted");
}

void awaitRecv(gloo::transport::UnboundBuffer& buffer, std::chrono::milliseconds timeout) {
  if (!buffer.waitRecv(timeout)) throw Error("recv aborted");
}

}  // namespace

GlooCommunicator::GlooCommunicator(Store& store, int rank, int size, const GlooOptions& options)
    : store_(store),
      prefix_(options.storePrefix),
      rank_(rank),
      size_(size),
      timeout_(options.timeout),
      sent_(size, 0),
      received_(size, 0) {
  ::gloo::transport::tcp::attr attr;
  attr.hostname = options.bindAddress;
  std::shared_ptr<::gloo::transport::Device> device = ::gloo::transport::tcp::CreateDevice(attr);
  auto context = std::make_shared<GlooMeshContext>(rank, size);
  context->setTimeout(options.timeout);
  try {
    context->connect(store, options.storePrefix, device);
  } catch (const ::gloo::Exception& e) {
    throw Error("rank " + std::to_string(rank) + ": Gloo rendezvous of " + std::to_string(size) +
                " ranks failed: " + e.what());
  }
  context_ = std::move(context);
}

GlooCommunicator::~GlooCommunicator() = default;

template <typename Fn>
void GlooCommunicator::collective(const char* op, Fn&& fn) {
  const uint64_t number = collectives_++;
  std::string cause;
  try {
    fn();
    return;
  } catch (const ::gloo::IoException& e) {
    cause = std::string("a peer closed its connection or timed out: ") + e.what();
  } catch (const ::gloo::Exception& e) {
    cause = e.what();
  }
  throw collectiveFailure(store_, prefix_, number, rank_, size_, std::min(kCheckInGrace, timeout_),
                          "gloo " + std::string(op), cause);
}

void GlooCommunicator::allReduceRing(char* data, size_t count, DType dtype, ReduceOp op) {
  // Reduce-scatter then all_gather, both rings: each rank sends and receives 2(n-1)/n of the
  // buffer, the bandwidth-optimal all_reduce. An average is scaled inside the reduce-scatter, so
  // the all_gather spreads finished blocks.
  std::vector<size_t> bounds(size_ + 1);
  for (int b = 0; b <= size_; ++b) bounds[b] = count * b / size_;
  ringReduceScatter(data, bounds, dtype, op);
  for (size_t& bound : bounds) bound *= dtypeBytes(dtype);
  ringAllGather(data, bounds);
}

void GlooCommunicator::doAllReduce(void* data, size_t count, DType dtype, ReduceOp op) {
  collective("all_reduce", [&] { allReduceRing(static_cast<char*>(data), count, dtype, op); });
}

// Ring reduce-scatter in place: `data` is split into size_ blocks at `bounds` (element offsets,
// size_ + 1 of them). At step s rank r sends its partial block r-s-1 to the right and adds the
// left's partial block r-s-2 into its own, so after size-1 steps block r holds the reduction of
// every rank's block r. Blocks travel in segments, each reduced as soon as it arrives.
// Rounding: every step's partial sum is rounded to the dtype (bf16/fp16 as NCCL's ring does, so
// the wire carries 16-bit values). Avg sums through the steps and scales in the last one, sum and
// scale rounded once there, as the shared-memory combine does.
void GlooCommunicator::ringReduceScatter(char* data, const std::vector<size_t>& bounds, DType dtype,
                                         ReduceOp op) {
  const int right = (rank_ + 1) % size_, left = (rank_ + size_ - 1) % size_;
  const size_t bytes = dtypeBytes(dtype);
  size_t largest = 0;
  for (int b = 0; b < size_; ++b) largest = std::max(largest, bounds[b + 1] - bounds[b]);
  ringIncoming_.resize(largest * bytes);
  auto outgoing = context_->createUnboundBuffer(data, bounds[size_] * bytes);
  auto incoming = context_->createUnboundBuffer(ringIncoming_.data(), largest * bytes);
  const uint64_t slot = ::gloo::Slot::build(kRingSlot, nextTag_++);
  const ReduceOp sumOrMax = op == ReduceOp::Max ? ReduceOp::Max : ReduceOp::Sum;
  const size_t segment = kRingSegmentBytes / bytes;
  for (int step = 0; step < size_ - 1; ++step) {
    const int sendBlock = (rank_ - step - 1 + 2 * size_) % size_;
    const int recvBlock = (rank_ - step - 2 + 2 * size_) % size_;
    const size_t recvCount = bounds[recvBlock + 1] - bounds[recvBlock];
    const size_t sendCount = bounds[sendBlock + 1] - bounds[sendBlock];
    const ReduceOp stepOp = step == size_ - 2 ? op : sumOrMax;
    for (size_t at = 0; at < recvCount; at += segment)
      incoming->recv(left, slot, at * bytes, std::min(segment, recvCount - at) * bytes);
    for (size_t at = 0; at < sendCount; at += segment)
      outgoing->send(right, slot, (bounds[sendBlock] + at) * bytes,
                     std::min(segment, sendCount - at) * bytes);
    for (size_t at = 0; at < recvCount; at += segment) {
      awaitRecv(*incoming, timeout_);
      char* target = data + (bounds[recvBlock] + at) * bytes;
      const void* inputs[] = {target, ringIncoming_.data() + at * bytes};
      reduceElements(target, inputs, 2, std::min(segment, recvCount - at), dtype, stepOp, size_);
    }
    for (size_t at = 0; at < sendCount; at += segment) awaitSend(*outgoing, timeout_);
  }
  // Alone, there is no last step to scale in (the average of one value is itself, NaNs quieted).
  if (op == ReduceOp::Avg && size_ == 1)
    scaleElements(data + bounds[0] * bytes, bounds[1] - bounds[0], dtype, 1.0f);
}

// Ring all_gather in place: block r (byte offsets `bounds`) is this rank's; at step s rank r
// forwards block r-s to the right and receives block r-s-1 from the left.
void GlooCommunicator::ringAllGather(char* data, const std::vector<size_t>& bounds) {
  const int right = (rank_ + 1) % size_, left = (rank_ + size_ - 1) % size_;
  auto outgoing = context_->createUnboundBuffer(data, bounds[size_]);
  auto incoming = context_->createUnboundBuffer(data, bounds[size_]);
  const uint64_t slot = ::gloo::Slot::build(kRingSlot, nextTag_++);
  for (int step = 0; step < size_ - 1; ++step) {
    const int sendBlock = (rank_ - step + size_) % size_;
    const int recvBlock = (rank_ - step - 1 + size_) % size_;
    const size_t recvBytes = bounds[recvBlock + 1] - bounds[recvBlock];
    const size_t sendBytes = bounds[sendBlock + 1] - bounds[sendBlock];
    if (recvBytes > 0) incoming->recv(left, slot, bounds[recvBlock], recvBytes);
    if (sendBytes > 0) outgoing->send(right, slot, bounds[sendBlock], sendBytes);
    if (recvBytes > 0) awaitRecv(*incoming, timeout_);
    if (sendBytes > 0) awaitSend(*outgoing, timeout_);
  }
}

void GlooCommunicator::doReduceScatter(const void* in, void* out, size_t countPerRank, DType dtype,
                                       ReduceOp op) {
  collective("reduce_scatter", [&] {
    const size_t bytes = dtypeBytes(dtype), blockBytes = countPerRank * bytes;
    scratch_.resize(blockBytes * size_);
    std::memcpy(scratch_.data(), in, scratch_.size());
    std::vector<size_t> bounds(size_ + 1);
    for (int b = 0; b <= size_; ++b) bounds[b] = countPerRank * b;
    ringReduceScatter(scratch_.data(), bounds, dtype, op);
    std::memcpy(out, scratch_.data() + rank_ * blockBytes, blockBytes);
  });
}

void GlooCommunicator::doAllGather(const void* in, void* out, size_t countPerRank, DType dtype) {
  collective("all_gather", [&] {
    const size_t blockBytes = countPerRank * dtypeBytes(dtype);
    std::memmove(static_cast<char*>(out) + rank_ * blockBytes, in, blockBytes);
    std::vector<size_t> bounds(size_ + 1);
    for (int b = 0; b <= size_; ++b) bounds[b] = blockBytes * b;
    ringAllGather(static_cast<char*>(out), bounds);
  });
}

void GlooCommunicator::doBroadcast(void* data, size_t count, DType dtype, int root) {
  collective("broadcast", [&] {
    ::gloo::BroadcastOptions opts(context_);
    opts.setOutput(static_cast<uint8_t*>(data), count * dtypeBytes(dtype));
    opts.setRoot(root);
    opts.setTag(nextTag_++);
    opts.setTimeout(timeout_);
    ::gloo::broadcast(opts);
  });
}

// Messages between a pair are numbered per direction; the slot carries the number and the
// direction, so A->B and B->A never meet. The byte count goes first, so a mismatch is named.
void GlooCommunicator::doSend(const void* data, size_t count, DType dtype, int peer) {
  uint64_t bytes = count * dtypeBytes(dtype);
  const uint32_t number = sent_[peer]++;
  const uint64_t slot = ::gloo::Slot::build(kPointToPointSlot, 2 * number + (rank_ < peer));
  try {
    auto header = context_->createUnboundBuffer(&bytes, sizeof(bytes));
    header->send(peer, slot);
    awaitSend(*header, timeout_);
    if (bytes == 0) return;
    auto body = context_->createUnboundBuffer(const_cast<void*>(data), bytes);
    body->send(peer, slot);
    awaitSend(*body, timeout_);
  } catch (const ::gloo::Exception& e) {
    throw TimeoutError("gloo send on rank " + std::to_string(rank_) + ": rank " +
                       std::to_string(peer) + " did not receive (" + e.what() + ")");
  }
}

void GlooCommunicator::doRecv(void* data, size_t count, DType dtype, int peer) {
  const uint64_t expected = count * dtypeBytes(dtype);
  uint64_t bytes = 0;
  const uint32_t number = received_[peer]++;
  const uint64_t slot = ::gloo::Slot::build(kPointToPointSlot, 2 * number + (peer < rank_));
  try {
    auto header = context_->createUnboundBuffer(&bytes, sizeof(bytes));
    header->recv(peer, slot);
    awaitRecv(*header, timeout_);
    if (bytes == 0 && expected == 0) return;
    // A message of the wrong size is still taken off the wire (the sender is not left waiting and
    // the pair stays in step), then reported.
    std::vector<char> discard(bytes != expected ? bytes : 0);
    auto body = context_->createUnboundBuffer(bytes != expected ? discard.data() : data, bytes);
    if (bytes > 0) {
      body->recv(peer, slot);
      awaitRecv(*body, timeout_);
    }
    if (bytes != expected)
      throw Error("gloo recv on rank " + std::to_string(rank_) + ": rank " + std::to_string(peer) +
                  " sent " + std::to_string(bytes) + " bytes, this rank expected " +
                  std::to_string(expected) + " (send and recv must name the same count and dtype)");
  } catch (const ::gloo::Exception& e) {
    throw TimeoutError("gloo recv on rank " + std::to_string(rank_) + ": rank " +
                       std::to_string(peer) + " did not send (" + e.what() + ")");
  }
}

void GlooCommunicator::doBarrier() {
  collective("barrier", [&] {
    ::gloo::BarrierOptions opts(context_);
    opts.setTag(nextTag_++);
    opts.setTimeout(timeout_);
    ::gloo::barrier(opts);
  });
}

}  // namespace ds::runtime
