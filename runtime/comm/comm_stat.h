// One row of a communication log: an op at one message size, on one rank.
#pragma once

#include <cstdint>
#include <string>

namespace ds::runtime {

struct CommStat {
  std::string op;      // all_reduce, all_gather, broadcast, barrier
  uint64_t bytes = 0;  // message size as nccl-tests counts it (all_gather: the gathered output)
  uint64_t count = 0;
  double totalSeconds = 0, minSeconds = 0, maxSeconds = 0;
};

}  // namespace ds::runtime
