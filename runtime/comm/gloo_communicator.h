// GlooCommunicator: Communicator over Gloo's TCP transport, rendezvous through a ds Store.
// all_reduce is a reduce-scatter ring then an all-gather ring over Gloo's unbound buffers, and
// those rings are reduce_scatter and all_gather too (the options-style gloo::allreduce stalls ~40
// ms per call on loopback, BUILD-NOTES.md; Gloo's halving-doubling reduce-scatter misplaces blocks;
// its options all_gather stalls at 512K-1M); send/recv are unbound-buffer messages. bf16/fp16
// travel as themselves (half fp32's bytes) and are combined by the fused 16-bit kernels; each ring
// step rounds its partial sum to the dtype, as NCCL's ring does (ringReduceScatter).
//
// When a collective fails, every rank that is still alive checks in under the op's number in the
// store; ranks that do not check in within a few seconds are named as the ones that did not answer.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "runtime/comm/communicator.h"
#include "runtime/comm/store.h"

namespace gloo {
class Context;
}  // namespace gloo

namespace ds::runtime {

struct GlooOptions {
  std::string bindAddress;  // the address this rank's transport listens on (its host)
  std::string storePrefix;  // unique per membership epoch and group
  std::chrono::milliseconds timeout{std::chrono::seconds(30)};
};

class GlooCommunicator : public Communicator {
 public:
  // `store` must outlive the communicator (failures are diagnosed through it).
  GlooCommunicator(Store& store, int rank, int size, const GlooOptions& options);
  ~GlooCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backendName() const override { return "gloo (tcp)"; }

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
  void allReduceRing(char* data, size_t count, DType dtype, ReduceOp op);
  void ringReduceScatter(char* data, const std::vector<size_t>& bounds, DType dtype, ReduceOp op);
  void ringAllGather(char* data, const std::vector<size_t>& bounds);
  // Runs one collective; a Gloo failure becomes a ds::Error naming the ranks that did not answer.
  template <typename Fn>
  void collective(const char* op, Fn&& fn);

  Store& store_;
  std::string prefix_;
  int rank_;
  int size_;
  std::chrono::milliseconds timeout_;
  std::shared_ptr<gloo::Context> context_;
  std::vector<char> scratch_;       // reduce_scatter's working copy of its input
  std::vector<char> ringIncoming_;  // a ring step's incoming block
  uint32_t nextTag_ = 0;
  uint64_t collectives_ = 0;               // collectives started, the same number on every rank
  std::vector<uint32_t> sent_, received_;  // send/recv messages per peer
};

}  // namespace ds::runtime
