// HierarchicalCommunicator: a group that spans nodes. Inside a node, ranks talk through shared
// memory; across nodes, only each node's first rank (its leader) talks, over Gloo. all_reduce:
// shared-memory all_reduce in every node, Gloo all_reduce among leaders, shared-memory broadcast
// back. Ranks must be numbered node by node (ds-launch's plan does this), so a node's ranks are
// contiguous. all_gather and broadcast need the same number of ranks on every node. send/recv:
// shared memory on one node, otherwise a Gloo pair connected on first use.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "runtime/comm/communicator.h"
#include "runtime/comm/gloo_communicator.h"
#include "runtime/comm/shm_communicator.h"
#include "runtime/comm/store.h"

namespace ds::runtime {

struct NodeLayout {
  int rank = 0, size = 1;            // in the whole group
  int localRank = 0, localSize = 1;  // on this node
  int nodeRank = 0, nodeCount = 1;
  bool uniform = true;  // every node has localSize ranks
};

class HierarchicalCommunicator : public Communicator {
 public:
  // Every rank calls this; `prefix` scopes the store keys (epoch and group). `store` must outlive
  // the communicator (send/recv across nodes connect through it on first use).
  HierarchicalCommunicator(Store& store, const std::string& prefix, const NodeLayout& layout,
                           const GlooOptions& leaderOptions, const ShmOptions& shmOptions = {});

  int rank() const override { return layout_.rank; }
  int size() const override { return layout_.size; }
  std::string backendName() const override { return "hierarchical (shared memory + gloo)"; }

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
  bool leader() const { return layout_.localRank == 0; }
  int firstOfMyNode() const { return layout_.rank - layout_.localRank; }
  bool onMyNode(int rank) const {
    return rank >= firstOfMyNode() && rank < firstOfMyNode() + layout_.localSize;
  }
  // A two-rank Gloo group with a rank on another node, connected when the pair first talks.
  Communicator& pairWith(int peer);

  Store& store_;
  std::string prefix_;
  GlooOptions leaderOptions_;
  NodeLayout layout_;
  std::unique_ptr<ShmCommunicator> local_;
  std::unique_ptr<GlooCommunicator> leaders_;  // only on leaders
  std::map<int, std::unique_ptr<GlooCommunicator>> pairs_;
  std::vector<char> scratch_;
};

}  // namespace ds::runtime
