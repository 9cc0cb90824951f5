// Hierarchical collectives: node-local shared memory, leaders over Gloo.
#include "runtime/comm/hierarchical_communicator.h"

#include <algorithm>

#include "runtime/common/error.h"

namespace ds::runtime {

HierarchicalCommunicator::HierarchicalCommunicator(Store& store, const std::string& prefix,
                                                   const NodeLayout& layout,
                                                   const GlooOptions& leaderOptions,
                                                   const ShmOptions& shmOptions)
    : layout_(layout) {
  local_ = std::make_unique<ShmCommunicator>(
      ShmCommunicator::join(store, prefix + "/shm/node" + std::to_string(layout.nodeRank),
                            layout.localRank, layout.localSize, shmOptions));
  if (leader() && layout.nodeCount > 1) {
    GlooOptions options = leaderOptions;
    options.storePrefix = prefix + "/gloo/leaders";
    leaders_ =
        std::make_unique<GlooCommunicator>(store, layout.nodeRank, layout.nodeCount, options);
  }
}

void HierarchicalCommunicator::allReduce(float* data, size_t count, ReduceOp op) {
  // An average is a sum scaled once at the end (the same scale on every rank: identical results).
  const ReduceOp stageOp = op == ReduceOp::Avg ? ReduceOp::Sum : op;
  local_->allReduce(data, count, stageOp);
  if (leaders_) leaders_->allReduce(data, count, stageOp);
  local_->broadcast(data, count, 0);
  if (op == ReduceOp::Avg) {
    const float scale = 1.0f / static_cast<float>(layout_.size);
    for (size_t i = 0; i < count; ++i) data[i] *= scale;
  }
}

void HierarchicalCommunicator::allGather(const float* in, float* out, size_t countPerRank) {
  if (!layout_.uniform)
    throw Error("hierarchical all_gather needs the same number of ranks on every node");
  // This node's ranks gather into their block of `out`, leaders exchange node blocks, and every
  // node's ranks receive the whole result from their leader.
  const size_t nodeBlock = countPerRank * layout_.localSize;
  float* mine = out + static_cast<size_t>(layout_.nodeRank) * nodeBlock;
  local_->allGather(in, mine, countPerRank);
  if (leaders_) {
    scratch_.assign(mine, mine + nodeBlock);
    leaders_->allGather(scratch_.data(), out, nodeBlock);
  }
  local_->broadcast(out, nodeBlock * layout_.nodeCount, 0);
}

void HierarchicalCommunicator::reduceScatterSum(const float* in, float* out, size_t countPerRank) {
  // The all_reduce sums inside each node first, where it is cheap.
  reduceScatterByAllReduce(*this, in, out, countPerRank, scratch_);
}

void HierarchicalCommunicator::broadcast(float* data, size_t count, int root) {
  if (root < 0 || root >= layout_.size)
    throw Error("broadcast: root " + std::to_string(root) + " is not a rank of this group of " +
                std::to_string(layout_.size));
  // Ranks are contiguous per node, so the root's node and local index follow from the layout when
  // every node has the same number of ranks; otherwise ask who holds it.
  const int firstOfMyNode = layout_.rank - layout_.localRank;
  const bool rootIsLocal = root >= firstOfMyNode && root < firstOfMyNode + layout_.localSize;
  if (rootIsLocal) local_->broadcast(data, count, root - firstOfMyNode);
  if (leaders_) {
    if (!layout_.uniform)
      throw Error("hierarchical broadcast needs the same number of ranks on every node");
    leaders_->broadcast(data, count, root / layout_.localSize);
  }
  if (!rootIsLocal) local_->broadcast(data, count, 0);
}

void HierarchicalCommunicator::barrier() {
  local_->barrier();
  if (leaders_) leaders_->barrier();
  local_->barrier();
}

}  // namespace ds::runtime
