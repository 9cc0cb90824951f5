// One row of a communication log (an op at one message size, on one rank) and the bus bandwidth
// rule that turns its time into nccl-tests' busbw, for the logger, the launcher's summary and
// ds-worker's comm bench alike.
#pragma once

#include <cstdint>
#include <string>

namespace ds {

struct CommStat {
  std::string op;      // all_reduce, all_gather, broadcast, barrier
  uint64_t bytes = 0;  // message size as nccl-tests counts it (all_gather: the gathered output)
  uint64_t count = 0;
  double totalSeconds = 0, minSeconds = 0, maxSeconds = 0;
};

// nccl-tests' bus bandwidth factor: all_reduce 2(n-1)/n, all_gather and reduce_scatter (n-1)/n,
// broadcast, send and recv 1, barrier 0.
double busBandwidthFactor(const std::string& op, int ranks);

}  // namespace ds
