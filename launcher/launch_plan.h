// LaunchPlan: which ranks run where. Built from the hostfile (or localhost with one slot per core),
// --num_nodes (first N hosts, hostfile order) and --num_gpus (first N slots of every host).
// Ranks are numbered in host order, then slot order, as DeepSpeed's runner does.
#pragma once

#include <string>
#include <vector>

#include "launcher/coordinator.h"
#include "launcher/hostfile.h"

namespace ds::launcher {

struct PlanRequest {
  int numNodes = -1;  // -1: every host
  int numGpus = -1;   // -1: every slot
};

struct LaunchPlan {
  std::vector<HostEntry> hosts;  // after selection
  std::vector<RankSlot> ranks;
  int worldSize() const { return static_cast<int>(ranks.size()); }
};

LaunchPlan makeLaunchPlan(const std::vector<HostEntry>& pool, const PlanRequest& request);

// localhost, 127.0.0.0/8 and ::1: started locally, each as if it were its own node.
bool isLoopbackHost(const std::string& host);

}  // namespace ds::launcher
