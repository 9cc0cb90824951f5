#include "common/comm_stat.h"

namespace ds {

double busBandwidthFactor(const std::string& op, int ranks) {
  if (ranks <= 1) return 0.0;
  if (op == "all_reduce") return 2.0 * (ranks - 1) / ranks;
  if (op == "all_gather" || op == "reduce_scatter") return static_cast<double>(ranks - 1) / ranks;
  if (op == "broadcast" || op == "send" || op == "recv") return 1.0;
  return 0.0;
}

double algBandwidthGBps(uint64_t bytes, double seconds) {
  return seconds > 0 ? bytes / seconds / 1e9 : 0.0;
}

double busBandwidthGBps(const std::string& op, uint64_t bytes, double seconds, int ranks) {
  return algBandwidthGBps(bytes, seconds) * busBandwidthFactor(op, ranks);
}

}  // namespace ds
