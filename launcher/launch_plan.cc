// makeLaunchPlan: selection of hosts and slots, then rank numbering.
#include "launcher/launch_plan.h"

#include <arpa/inet.h>

#include "runtime/common/error.h"

namespace ds::launcher {

bool isLoopbackHost(const std::string& host) {
  if (host == "localhost" || host == "::1") return true;
  in_addr address{};
  if (inet_pton(AF_INET, host.c_str(), &address) != 1) return false;
  return (ntohl(address.s_addr) >> 24) == 127;
}

LaunchPlan makeLaunchPlan(const std::vector<HostEntry>& pool, const PlanRequest& request) {
  if (request.numNodes == 0 || request.numNodes < -1)
    throw Error("--num_nodes: expected a positive number of nodes, got " +
                std::to_string(request.numNodes));
  if (request.numGpus == 0 || request.numGpus < -1)
    throw Error("--num_gpus: expected a positive number of slots per node, got " +
                std::to_string(request.numGpus));
  if (request.numNodes > static_cast<int>(pool.size()))
    throw Error("--num_nodes " + std::to_string(request.numNodes) + ": only " +
                std::to_string(pool.size()) + " hosts are available");

  LaunchPlan plan;
  const size_t nodes = request.numNodes > 0 ? request.numNodes : pool.size();
  for (size_t n = 0; n < nodes; ++n) {
    HostEntry host = pool[n];
    if (request.numGpus > 0) {
      if (request.numGpus > host.slots)
        throw Error("--num_gpus " + std::to_string(request.numGpus) + ": host " + host.host +
                    " has only " + std::to_string(host.slots) + " slots");
      host.slots = request.numGpus;
    }
    if (host.slots > 0) plan.hosts.push_back(host);
  }
  for (const auto& host : plan.hosts)
    for (int slot = 0; slot < host.slots; ++slot)
      plan.ranks.push_back(
          {static_cast<int>(plan.ranks.size()), host.host, slot, slot, host.slots});
  if (plan.ranks.empty())
    throw Error(
        "no slots selected: every selected host has slots=0; give hosts slots=N with N > 0");
  return plan;
}

}  // namespace ds::launcher
