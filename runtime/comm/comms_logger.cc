// CommsLogger and LoggingCommunicator.
#include "runtime/comm/comms_logger.h"

#include <algorithm>

namespace ds::runtime {

CommsLogger::CommsLogger(CommsLoggerConfig config, std::FILE* verboseOut)
    : config_(std::move(config)), verboseOut_(verboseOut) {}

bool CommsLogger::profiles(CollectiveOp op) const {
  if (!config_.enabled) return false;
  return config_.profAll || std::find(config_.profOps.begin(), config_.profOps.end(),
                                      collectiveOpName(op)) != config_.profOps.end();
}

void CommsLogger::record(CollectiveOp op, const std::string& group, int groupSize,
                         uint64_t bytes, double seconds) {
  if (!profiles(op)) return;
  std::lock_guard lock(mutex_);
  CommStat& stat = stats_[{collectiveOpName(op), group, bytes}];
  if (stat.count == 0) {
    stat.op = op;
    stat.bytes = bytes;
    stat.group = group;
    stat.groupSize = groupSize;
    stat.minSeconds = stat.maxSeconds = seconds;
  }
  ++stat.count;
  stat.totalSeconds += seconds;
  stat.minSeconds = std::min(stat.minSeconds, seconds);
  stat.maxSeconds = std::max(stat.maxSeconds, seconds);
  if (config_.verbose && verboseOut_ != nullptr)
    std::fprintf(
        verboseOut_,
        "comm op: %s | group: %s | time (ms): %.3f | msg size: %llu B | algbw (GB/s): %.3f "
        "| busbw (GB/s): %.3f\n",
        collectiveOpName(op), group.empty() ? "-" : group.c_str(), seconds * 1e3,
        static_cast<unsigned long long>(bytes), algBandwidthGBps(bytes, seconds),
        busBandwidthGBps(op, bytes, seconds, groupSize));
}

uint64_t CommsLogger::bytes(std::optional<CollectiveOp> op) const {
  std::lock_guard lock(mutex_);
  uint64_t total = 0;
  for (const auto& [key, stat] : stats_)
    if (!op || stat.op == *op) total += stat.bytes * stat.count;
  return total;
}

std::vector<CommStat> CommsLogger::summary() const {
  std::lock_guard lock(mutex_);
  std::vector<CommStat> out;
  for (const auto& [key, stat] : stats_) out.push_back(stat);
  return out;
}

template <typename Op>
void LoggingCommunicator::timed(CollectiveOp kind, uint64_t bytes, Op op) {
  if (!logger_.profiles(kind)) return op();
  const auto start = std::chrono::steady_clock::now();
  op();
  logger_.record(kind, group_, size(), bytes,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

void LoggingCommunicator::doAllReduce(void* data, size_t count, DType dtype, ReduceOp op) {
  timed(CollectiveOp::AllReduce, count * dtypeBytes(dtype), [&] { inner_.allReduce(data, count, dtype, op); });
}

void LoggingCommunicator::doAllGather(const void* in, void* out, size_t countPerRank, DType dtype) {
  timed(CollectiveOp::AllGather, countPerRank * size() * dtypeBytes(dtype),
        [&] { inner_.allGather(in, out, countPerRank, dtype); });
}

void LoggingCommunicator::doReduceScatter(const void* in, void* out, size_t countPerRank,
                                          DType dtype, ReduceOp op) {
  timed(CollectiveOp::ReduceScatter, countPerRank * size() * dtypeBytes(dtype),
        [&] { inner_.reduceScatter(in, out, countPerRank, dtype, op); });
}

void LoggingCommunicator::doBroadcast(void* data, size_t count, DType dtype, int root) {
  timed(CollectiveOp::Broadcast, count * dtypeBytes(dtype),
        [&] { inner_.broadcast(data, count, dtype, root); });
}

void LoggingCommunicator::doAllToAll(const void* in, void* out, size_t countPerRank,
                                     DType dtype) {
  // DeepSpeed's all_to_all_single logs its tensor's size: every rank's chunk, its own included.
  timed(CollectiveOp::AllToAll, countPerRank * size() * dtypeBytes(dtype),
        [&] { inner_.allToAll(in, out, countPerRank, dtype); });
}

void LoggingCommunicator::doSend(const void* data, size_t count, DType dtype, int peer) {
  timed(CollectiveOp::Send, count * dtypeBytes(dtype), [&] { inner_.send(data, count, dtype, peer); });
}

void LoggingCommunicator::doRecv(void* data, size_t count, DType dtype, int peer) {
  timed(CollectiveOp::Recv, count * dtypeBytes(dtype), [&] { inner_.recv(data, count, dtype, peer); });
}

void LoggingCommunicator::doBarrier() {
  timed(CollectiveOp::Barrier, 0, [&] { inner_.barrier(); });
}

}  // namespace ds::runtime
