#include "common/comm_stat.h"

namespace ds {

double busBandwidthFactor(CollectiveOp op, int ranks) {
  if (ranks <= 1) return 0.0;
  switch (op) {
    case CollectiveOp::AllReduce:
      return 2.0 * (ranks - 1) / ranks;
    case CollectiveOp::AllGather:
    case CollectiveOp::ReduceScatter:
    case CollectiveOp::AllToAll:  // each rank keeps 1 / ranks of what it sends
      return static_cast<double>(ranks - 1) / ranks;
    case CollectiveOp::Broadcast:
    case CollectiveOp::Send:
    case CollectiveOp::Recv:
      return 1.0;
    case CollectiveOp::Barrier:
      break;
  }
  return 0.0;
}

double algBandwidthGBps(uint64_t bytes, double seconds) {
  return seconds > 0 ? bytes / seconds / 1e9 : 0.0;
}

double busBandwidthGBps(CollectiveOp op, uint64_t bytes, double seconds, int ranks) {
  return algBandwidthGBps(bytes, seconds) * busBandwidthFactor(op, ranks);
}

}  // namespace ds
