// LaunchPlan: which ranks run where, from the selected resources. Ranks are numbered in host order,
// then slot order, as DeepSpeed's launch.py does; LOCAL_RANK is the index on the node.
#pragma once

#include <string>
#include <vector>

#include "launcher/coordinator.h"
#include "launcher/resources.h"

namespace ds::launcher {

struct LaunchPlan {
  Resources nodes;  // selected hosts and slot ids, hostfile order; node rank = index
  std::vector<RankPlacement> ranks;
  int worldSize() const { return static_cast<int>(ranks.size()); }
};

LaunchPlan makeLaunchPlan(const Resources& selected);

// localhost, 127.0.0.0/8 and ::1: started locally, each as if it were its own node.
bool isLoopbackHost(const std::string& host);

}  // namespace ds::launcher

namespace ds::launcher {

// Where the coordinator listens when --master_addr is not given: the first host itself when every
// host is loopback (127.0.0.1 for "localhost"), else this machine's first non-loopback IPv4
// address (the nodes must reach it).
std::string defaultMasterAddress(const LaunchPlan& plan);

bool allLoopback(const LaunchPlan& plan);

}  // namespace ds::launcher
