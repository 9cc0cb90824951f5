// NcclCommunicator: collectives on GPU buffers through NCCL, built only when CUDA and NCCL are
// found (library ds_nccl). Rank 0's unique id travels through the store. Every op is issued on the
// communicator's own stream and waited for with a deadline: NCCL's calls never return while a peer
// is missing, so a late op aborts the communicator (ncclCommAbort) and fails with the ranks that
// did not check in (check_in.h). All pointers given to ops are device pointers.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "runtime/comm/communicator.h"
#include "runtime/comm/store.h"

namespace ds::runtime {

struct NcclOptions {
  int device = 0;           // the CUDA device this rank drives (its LOCAL_RANK usually)
  std::string storePrefix;  // unique per membership epoch and group
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
};

class NcclCommunicator : public Communicator {
 public:
  // Blocks until every rank joined (or the timeout passed). `store` must outlive it.
  NcclCommunicator(Store& store, int rank, int size, const NcclOptions& options);
  ~NcclCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backendName() const override { return "nccl"; }
  void copyLocal(void* to, const void* from, size_t bytes) override;

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
  struct State;  // NCCL and CUDA handles, kept out of this header
  // Waits for the op just issued; on timeout or NCCL error aborts and throws, naming ranks.
  void finish(const char* op, int result);

  Store& store_;
  std::string prefix_;
  int rank_;
  int size_;
  std::chrono::milliseconds timeout_;
  std::unique_ptr<State> state_;
  uint64_t ops_ = 0;  // collectives issued, the same number on every rank
};

}  // namespace ds::runtime
