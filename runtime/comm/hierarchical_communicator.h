// HierarchicalCommunicator: a group that spans nodes. Inside a node, ranks talk through shared
// memory; across nodes, only each node's first rank (its leader) talks, over Gloo. all_reduce:
// shared-memory all_reduce in every node, Gloo all_reduce among leaders, shared-memory broadcast
// back. Ranks must be numbered node by node (ds-launch's plan does this), so a node's ranks are
// contiguous. all_gather needs the same number of ranks on every node (else: error at build).
#pragma once

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
  // Every rank calls this; `prefix` scopes the store keys (epoch and group).
  HierarchicalCommunicator(Store& store, const std::string& prefix, const NodeLayout& layout,
                           const GlooOptions& leaderOptions, const ShmOptions& shmOptions = {});

  int rank() const override { return layout_.rank; }
  int size() const override { return layout_.size; }
  void allReduce(float* data, size_t count, ReduceOp op) override;
  void allGather(const float* in, float* out, size_t countPerRank) override;
  void reduceScatterSum(const float* in, float* out, size_t countPerRank) override;
  void broadcast(float* data, size_t count, int root) override;
  void barrier() override;

 private:
  bool leader() const { return layout_.localRank == 0; }
  NodeLayout layout_;
  std::unique_ptr<ShmCommunicator> local_;
  std::unique_ptr<GlooCommunicator> leaders_;  // only on leaders
  std::vector<float> scratch_;
};

}  // namespace ds::runtime
