// The merged communication table ds-launch prints at the end of a job whose config enables
// comms_logger: per op, group and message size, the count and the per-rank average latency as
// min / median / max across the group's ranks with the slowest rank named (stragglers stand out),
// and the bus bandwidth at the median on the group's own rank count.
#pragma once

#include <string>
#include <vector>

#include "common/comm_stat.h"

namespace ds::launcher {

// perRank[r] is rank r's summary (empty when it reported none). "" when nobody logged anything.
std::string formatCommsSummary(const std::vector<std::vector<ds::CommStat>>& perRank);

}  // namespace ds::launcher
