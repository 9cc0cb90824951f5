// One row of a communication log (an op on one group at one message size, on one rank) and the
// bandwidth rules that turn its time into nccl-tests' algbw and busbw, for the logger, the
// launcher's summary and ds-worker's comm bench alike.
#pragma once

#include <cstdint>
#include <string>

#include "common/collective_op.h"

namespace ds {

struct CommStat {
  CollectiveOp op = CollectiveOp::AllReduce;
  uint64_t bytes = 0;  // message size as nccl-tests counts it (all_gather: the gathered output)
  uint64_t count = 0;
  double totalSeconds = 0, minSeconds = 0, maxSeconds = 0;
  // The communicator the op ran on ("world", "data (ranks 0,2)"; "" when unnamed) and its rank
  // count, which is the n of the bus bandwidth factor: a 2-rank group's all_reduce moves
  // 2(2-1)/2 of its message over the bus whatever the world's size.
  std::string group;
  int groupSize = 0;
};

// nccl-tests' bus bandwidth factor: all_reduce 2(n-1)/n, all_gather and reduce_scatter (n-1)/n,
// broadcast, send and recv 1, barrier 0; n is the rank count of the group the op ran on.
double busBandwidthFactor(CollectiveOp op, int ranks);

// GB/s of an op of `bytes` that took `seconds` on a group of `ranks`; 0 when no time passed.
double algBandwidthGBps(uint64_t bytes, double seconds);
double busBandwidthGBps(CollectiveOp op, uint64_t bytes, double seconds, int ranks);

}  // namespace ds
