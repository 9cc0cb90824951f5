// Communication logging, DeepSpeed's comms_logger: per op, group and message size, the count,
// total, minimum and maximum latency; with `verbose` one line per op as it happens. One logger may
// serve the LoggingCommunicators of several groups (world, data, model, pipe...), each op kept
// under its own group and its bandwidth figured on that group's rank count. LoggingCommunicator
// times (blocking) ops with the wall clock: no extra synchronisation is added, unlike DeepSpeed's,
// which synchronises the device around every op.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "common/comm_stat.h"
#include "runtime/comm/comms_logger_config.h"
#include "runtime/comm/communicator.h"

namespace ds::runtime {

class CommsLogger {
 public:
  explicit CommsLogger(CommsLoggerConfig config, std::FILE* verboseOut = stdout);
  bool profiles(CollectiveOp op) const;
  // `group` and `groupSize`: the communicator the op ran on, as CommStat names them. Safe to call
  // from the threads of several groups at once.
  void record(CollectiveOp op, const std::string& group, int groupSize, uint64_t bytes,
              double seconds);
  // Sorted by op name, then group, then size.
  std::vector<CommStat> summary() const;
  // The bytes of every message recorded so far (each size times its count), of one op or all.
  uint64_t bytes(std::optional<CollectiveOp> op = std::nullopt) const;

 private:
  CommsLoggerConfig config_;
  std::FILE* verboseOut_;
  mutable std::mutex mutex_;  // guards stats_ and keeps verbose lines whole
  std::map<std::tuple<std::string, std::string, uint64_t>, CommStat> stats_;
};

class LoggingCommunicator : public Communicator {
 public:
  // Takes the inner group's name: its ops are tracked under the wrapper's, the outermost call,
  // and logged under it.
  LoggingCommunicator(Communicator& inner, CommsLogger& logger)
      : inner_(inner), logger_(logger), group_(inner.groupName()) {
    setGroupName(group_);
  }
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::string backendName() const override { return inner_.backendName(); }
  void copyLocal(void* to, const void* from, size_t bytes) override {
    inner_.copyLocal(to, from, bytes);
  }

 protected:
  void doAllReduce(void* data, size_t count, DType dtype, ReduceOp op) override;
  void doAllGather(const void* in, void* out, size_t countPerRank, DType dtype) override;
  void doReduceScatter(const void* in, void* out, size_t countPerRank, DType dtype,
                       ReduceOp op) override;
  void doBroadcast(void* data, size_t count, DType dtype, int root) override;
  void doAllToAll(const void* in, void* out, size_t countPerRank, DType dtype) override;
  void doSend(const void* data, size_t count, DType dtype, int peer) override;
  void doRecv(void* data, size_t count, DType dtype, int peer) override;
  void doBarrier() override;

 private:
  template <typename Op>
  void timed(CollectiveOp kind, uint64_t bytes, Op op);
  Communicator& inner_;
  CommsLogger& logger_;
  std::string group_;  // the name once, not looked up in the tracker's table on every op
};

}  // namespace ds::runtime
