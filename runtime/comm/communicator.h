// Communicator: the collectives the runtime needs, over a fixed group of ranks, on fp32, bf16 or
// fp16 buffers (halves as 16-bit patterns). Backends: shared memory (one node), hierarchical
// (shared memory inside nodes, Gloo between them), Gloo over TCP, NCCL for GPU buffers. Ops are
// blocking and every one is bounded by the communicator's timeout: a dead or silent peer fails the
// op with a ds::Error (TimeoutError when it is silent) naming it, never hangs it.
//
// The public calls check their arguments, handle the one-rank group and record each op in the
// process's CollectiveTracker while it runs (the heartbeat reports it); backends implement the
// protected do* hooks for groups of two or more with valid arguments.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "runtime/comm/collective_tracker.h"

namespace ds::runtime {

enum class ReduceOp { Sum, Avg, Max };
const char* reduceOpName(ReduceOp op);

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // For messages: "shared memory", "gloo (tcp)", ...
  virtual std::string backendName() const = 0;
  // Which group this is ("world", "ranks 0,2"), as the tracker reports the ops on it. Set by
  // whoever makes the group (GroupFactory); unnamed groups report "".
  void setGroupName(const std::string& name) { group_ = CollectiveTracker::internGroup(name); }
  std::string groupName() const { return CollectiveTracker::groupName(group_); }

  // In place: data[i] = sum (average, maximum) over ranks of data[i]. Every rank gets
  // bitwise-identical results.
  void allReduce(void* data, size_t count, DType dtype, ReduceOp op = ReduceOp::Sum);
  // out holds size() * countPerRank elements; rank r's `in` lands at out + r * countPerRank.
  void allGather(const void* in, void* out, size_t countPerRank, DType dtype);
  // in holds size() * countPerRank elements; out (countPerRank) gets block rank() of everyone's
  // `in`, reduced.
  void reduceScatter(const void* in, void* out, size_t countPerRank, DType dtype,
                     ReduceOp op = ReduceOp::Sum);
  // in holds size() blocks of countPerRank, block j for rank j; out gets block i from rank i.
  // Pairwise exchanges over send/recv, the pairs in one fixed order (the lower rank of a pair
  // sends first), so that no backend's blocking send can deadlock: (size - 1) / size of the data
  // crosses the wire, as in a true all-to-all, in up to size - 1 rounds.
  void allToAll(const void* in, void* out, size_t countPerRank, DType dtype);
  void broadcast(void* data, size_t count, DType dtype, int root);
  // Point to point, matched in order per (sender, receiver): the k-th send from A to B meets B's
  // k-th recv from A, and both must name the same count and dtype (a mismatch is an error).
  void send(const void* data, size_t count, DType dtype, int peer);
  void recv(void* data, size_t count, DType dtype, int peer);
  void barrier();
  // A copy within this rank's buffers (host memory, or device memory for a GPU backend): what a
  // one-rank group's all_gather and reduce_scatter do.
  virtual void copyLocal(void* to, const void* from, size_t bytes);

  // fp32 shorthands.
  void allReduce(float* data, size_t count, ReduceOp op = ReduceOp::Sum) {
    allReduce(data, count, DType::F32, op);
  }
  void allGather(const float* in, float* out, size_t countPerRank) {
    allGather(in, out, countPerRank, DType::F32);
  }
  void reduceScatter(const float* in, float* out, size_t countPerRank,
                     ReduceOp op = ReduceOp::Sum) {
    reduceScatter(in, out, countPerRank, DType::F32, op);
  }
  void allToAll(const float* in, float* out, size_t countPerRank) {
    allToAll(in, out, countPerRank, DType::F32);
  }
  void broadcast(float* data, size_t count, int root) { broadcast(data, count, DType::F32, root); }
  void send(const float* data, size_t count, int peer) { send(data, count, DType::F32, peer); }
  void recv(float* data, size_t count, int peer) { recv(data, count, DType::F32, peer); }

 protected:
  virtual void doAllReduce(void* data, size_t count, DType dtype, ReduceOp op) = 0;
  virtual void doAllGather(const void* in, void* out, size_t countPerRank, DType dtype) = 0;
  virtual void doReduceScatter(const void* in, void* out, size_t countPerRank, DType dtype,
                               ReduceOp op) = 0;
  virtual void doBroadcast(void* data, size_t count, DType dtype, int root) = 0;
  // Pairwise send / recv over every pair (i, j), i < j, in one fixed order, so it cannot
  // deadlock; a backend with an all-to-all of its own overrides it.
  virtual void doAllToAll(const void* in, void* out, size_t countPerRank, DType dtype);
  virtual void doSend(const void* data, size_t count, DType dtype, int peer) = 0;
  virtual void doRecv(void* data, size_t count, DType dtype, int peer) = 0;
  virtual void doBarrier() = 0;

 private:
  uint32_t group_ = 0;  // CollectiveTracker's id of the group name
};

// Reduce-scatter as an all_reduce of a copy of `in`, keeping this rank's block: correct, at twice
// the traffic of a real reduce-scatter. `scratch` is the caller's, reused across calls.
void reduceScatterByAllReduce(Communicator& comm, const void* in, void* out, size_t countPerRank,
                              DType dtype, ReduceOp op, std::vector<char>& scratch);

}  // namespace ds::runtime
