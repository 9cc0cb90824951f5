// Hierarchical collectives: node-local shared memory, leaders over Gloo.
#include "runtime/comm/hierarchical_communicator.h"

#include <algorithm>
#include <cstring>

#include "common/error.h"
#include "runtime/comm/elementwise_reduce.h"

namespace ds::runtime {

HierarchicalCommunicator::HierarchicalCommunicator(Store& store, const std::string& prefix,
                                                   const NodeLayout& layout,
                                                   const GlooOptions& leaderOptions,
                                                   const ShmOptions& shmOptions)
    : store_(store), prefix_(prefix), leaderOptions_(leaderOptions), layout_(layout) {
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

void HierarchicalCommunicator::doAllReduce(void* data, size_t count, DType dtype, ReduceOp op) {
  // An average is a sum scaled once at the end (the same scale on every rank: identical results).
  const ReduceOp stageOp = op == ReduceOp::Avg ? ReduceOp::Sum : op;
  local_->allReduce(data, count, dtype, stageOp);
  if (leaders_) leaders_->allReduce(data, count, dtype, stageOp);
  local_->broadcast(data, count, dtype, 0);
  if (op == ReduceOp::Avg)
    scaleElements(data, count, dtype, 1.0f / static_cast<float>(layout_.size));
}

void HierarchicalCommunicator::doAllGather(const void* in, void* out, size_t countPerRank,
                                           DType dtype) {
  if (!layout_.uniform)
    throw Error("hierarchical all_gather needs the same number of ranks on every node");
  // This node's ranks gather into their block of `out`, leaders exchange node blocks, and every
  // node's ranks receive the whole result from their leader.
  const size_t nodeBlock = countPerRank * layout_.localSize;
  const size_t nodeBytes = nodeBlock * dtypeBytes(dtype);
  char* mine = static_cast<char*>(out) + static_cast<size_t>(layout_.nodeRank) * nodeBytes;
  local_->allGather(in, mine, countPerRank, dtype);
  if (leaders_) {
    scratch_.assign(mine, mine + nodeBytes);
    leaders_->allGather(scratch_.data(), out, nodeBlock, dtype);
  }
  local_->broadcast(out, nodeBlock * layout_.nodeCount, dtype, 0);
}

void HierarchicalCommunicator::doReduceScatter(const void* in, void* out, size_t countPerRank,
                                               DType dtype, ReduceOp op) {
  // The all_reduce sums inside each node first, where it is cheap.
  reduceScatterByAllReduce(*this, in, out, countPerRank, dtype, op, scratch_);
}

void HierarchicalCommunicator::doBroadcast(void* data, size_t count, DType dtype, int root) {
  // Ranks are contiguous per node, so the root's node and local index follow from the layout.
  const bool rootIsLocal = onMyNode(root);
  if (rootIsLocal) local_->broadcast(data, count, dtype, root - firstOfMyNode());
  if (leaders_) {
    if (!layout_.uniform)
      throw Error("hierarchical broadcast needs the same number of ranks on every node");
    leaders_->broadcast(data, count, dtype, root / layout_.localSize);
  }
  if (!rootIsLocal) local_->broadcast(data, count, dtype, 0);
}

Communicator& HierarchicalCommunicator::pairWith(int peer) {
  auto& pair = pairs_[peer];
  if (!pair) {
    const int low = std::min(peer, layout_.rank), high = std::max(peer, layout_.rank);
    GlooOptions options = leaderOptions_;
    options.storePrefix = prefix_ + "/gloo/pair" + std::to_string(low) + "-" + std::to_string(high);
    pair = std::make_unique<GlooCommunicator>(store_, layout_.rank == low ? 0 : 1, 2, options);
  }
  return *pair;
}

void HierarchicalCommunicator::doSend(const void* data, size_t count, DType dtype, int peer) {
  if (onMyNode(peer)) return local_->send(data, count, dtype, peer - firstOfMyNode());
  Communicator& pair = pairWith(peer);
  pair.send(data, count, dtype, 1 - pair.rank());
}

void HierarchicalCommunicator::doRecv(void* data, size_t count, DType dtype, int peer) {
  if (onMyNode(peer)) return local_->recv(data, count, dtype, peer - firstOfMyNode());
  Communicator& pair = pairWith(peer);
  pair.recv(data, count, dtype, 1 - pair.rank());
}

void HierarchicalCommunicator::doBarrier() {
  local_->barrier();
  if (leaders_) leaders_->barrier();
  local_->barrier();
}

}  // namespace ds::runtime
