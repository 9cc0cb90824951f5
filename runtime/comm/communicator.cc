// Argument checks and the one-rank group, once for every backend.
#include "runtime/comm/communicator.h"

#include <cstring>

#include "common/error.h"

namespace ds::runtime {
namespace {

void checkRoot(int root, int size, const char* op) {
  if (root < 0 || root >= size)
    throw Error(std::string(op) + ": root " + std::to_string(root) +
                " is not a rank of this group of " + std::to_string(size));
}

void checkPeer(int peer, int rank, int size, const char* op) {
  if (peer < 0 || peer >= size || peer == rank)
    throw Error(std::string(op) + " on rank " + std::to_string(rank) + ": peer " +
                std::to_string(peer) + " is not another rank of this group of " +
                std::to_string(size));
}

}  // namespace

const char* reduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return "sum";
    case ReduceOp::Avg:
      return "avg";
    case ReduceOp::Max:
      return "max";
  }
  return "?";
}

void Communicator::allReduce(void* data, size_t count, DType dtype, ReduceOp op) {
  if (size() == 1 || count == 0) return;
  const CollectiveTracker::Scope tracked(CollectiveTracker::process(), CollectiveOp::AllReduce,
                                         group_);
  doAllReduce(data, count, dtype, op);
}

void Communicator::allGather(const void* in, void* out, size_t countPerRank, DType dtype) {
  if (size() == 1) return copyLocal(out, in, countPerRank * dtypeBytes(dtype));
  if (countPerRank == 0) return;
  const CollectiveTracker::Scope tracked(CollectiveTracker::process(), CollectiveOp::AllGather,
                                         group_);
  doAllGather(in, out, countPerRank, dtype);
}

void Communicator::reduceScatter(const void* in, void* out, size_t countPerRank, DType dtype,
                                 ReduceOp op) {
  if (size() == 1) return copyLocal(out, in, countPerRank * dtypeBytes(dtype));
  if (countPerRank == 0) return;
  const CollectiveTracker::Scope tracked(CollectiveTracker::process(), CollectiveOp::ReduceScatter,
                                         group_);
  doReduceScatter(in, out, countPerRank, dtype, op);
}

void Communicator::allToAll(const void* in, void* out, size_t countPerRank, DType dtype) {
  const size_t bytes = countPerRank * dtypeBytes(dtype);
  const int me = rank();
  if (size() == 1 || countPerRank == 0) {
    copyLocal(static_cast<char*>(out) + me * bytes, static_cast<const char*>(in) + me * bytes,
              bytes);
    return;
  }
  const CollectiveTracker::Scope tracked(CollectiveTracker::process(), CollectiveOp::AllToAll,
                                         group_);
  doAllToAll(in, out, countPerRank, dtype);
}

void Communicator::doAllToAll(const void* in, void* out, size_t countPerRank, DType dtype) {
  const size_t bytes = countPerRank * dtypeBytes(dtype);
  const int me = rank();
  const auto* from = static_cast<const char*>(in);
  auto* to = static_cast<char*>(out);
  copyLocal(to + me * bytes, from + me * bytes, bytes);
  // The pairs (i, j), i < j, in order: a rank's earliest unfinished pair always has its partner
  // there too, every pair before it in the order being done.
  for (int i = 0; i < size(); ++i)
    for (int j = i + 1; j < size(); ++j) {
      if (me != i && me != j) continue;
      const int peer = me == i ? j : i;
      if (me == i) {
        send(from + peer * bytes, countPerRank, dtype, peer);
        recv(to + peer * bytes, countPerRank, dtype, peer);
      } else {
        recv(to + peer * bytes, countPerRank, dtype, peer);
        send(from + peer * bytes, countPerRank, dtype, peer);
      }
    }
}

void Communicator::broadcast(void* data, size_t count, DType dtype, int root) {
  checkRoot(root, size(), "broadcast");
  if (size() == 1 || count == 0) return;
  const CollectiveTracker::Scope tracked(CollectiveTracker::process(), CollectiveOp::Broadcast,
                                         group_);
  doBroadcast(data, count, dtype, root);
}

void Communicator::send(const void* data, size_t count, DType dtype, int peer) {
  checkPeer(peer, rank(), size(), "send");
  const CollectiveTracker::Scope tracked(CollectiveTracker::process(), CollectiveOp::Send, group_);
  doSend(data, count, dtype, peer);
}

void Communicator::recv(void* data, size_t count, DType dtype, int peer) {
  checkPeer(peer, rank(), size(), "recv");
  const CollectiveTracker::Scope tracked(CollectiveTracker::process(), CollectiveOp::Recv, group_);
  doRecv(data, count, dtype, peer);
}

void Communicator::copyLocal(void* to, const void* from, size_t bytes) {
  std::memmove(to, from, bytes);
}

void Communicator::barrier() {
  if (size() == 1) return;
  const CollectiveTracker::Scope tracked(CollectiveTracker::process(), CollectiveOp::Barrier,
                                         group_);
  doBarrier();
}

void reduceScatterByAllReduce(Communicator& comm, const void* in, void* out, size_t countPerRank,
                              DType dtype, ReduceOp op, std::vector<char>& scratch) {
  const size_t blockBytes = countPerRank * dtypeBytes(dtype);
  scratch.assign(static_cast<const char*>(in),
                 static_cast<const char*>(in) + blockBytes * comm.size());
  comm.allReduce(scratch.data(), countPerRank * comm.size(), dtype, op);
  std::memcpy(out, scratch.data() + blockBytes * comm.rank(), blockBytes);
}

}  // namespace ds::runtime
