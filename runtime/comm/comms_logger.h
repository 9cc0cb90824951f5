// Communication logging, DeepSpeed's comms_logger: per op and message size, the count, total,
// minimum and maximum latency; with `verbose` one line per op as it happens. LoggingCommunicator
// wraps any communicator and times its (blocking) ops with the wall clock: no extra
// synchronisation is added, unlike DeepSpeed's, which synchronises the device around every op.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "common/comm_stat.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/comms_logger_config.h"

namespace ds::runtime {

class CommsLogger {
 public:
  CommsLogger(CommsLoggerConfig config, int ranks, std::FILE* verboseOut = stdout);
  bool profiles(const std::string& op) const;
  void record(const std::string& op, uint64_t bytes, double seconds);
  // Sorted by op, then size.
  std::vector<CommStat> summary() const;

 private:
  CommsLoggerConfig config_;
  int ranks_;
  std::FILE* verboseOut_;
  std::map<std::pair<std::string, uint64_t>, CommStat> stats_;
};

class LoggingCommunicator : public Communicator {
 public:
  // Takes the inner group's name: its ops are tracked under the wrapper's, the outermost call.
  LoggingCommunicator(Communicator& inner, CommsLogger& logger) : inner_(inner), logger_(logger) {
    setGroupName(inner.groupName());
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
  void doSend(const void* data, size_t count, DType dtype, int peer) override;
  void doRecv(void* data, size_t count, DType dtype, int peer) override;
  void doBarrier() override;

 private:
  template <typename Op>
  void timed(const char* name, uint64_t bytes, Op op);
  Communicator& inner_;
  CommsLogger& logger_;
};

}  // namespace ds::runtime
