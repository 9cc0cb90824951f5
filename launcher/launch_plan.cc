// makeLaunchPlan: rank numbering over the selected resources.
#include "launcher/launch_plan.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>

#include "common/error.h"

namespace ds::launcher {

bool isLoopbackHost(const std::string& host) {
  if (host == "localhost" || host == "::1") return true;
  in_addr address{};
  if (inet_pton(AF_INET, host.c_str(), &address) != 1) return false;
  return (ntohl(address.s_addr) >> 24) == 127;
}

LaunchPlan makeLaunchPlan(const Resources& selected) {
  LaunchPlan plan;
  plan.nodes = selected;
  for (size_t node = 0; node < selected.size(); ++node) {
    const auto& slots = selected[node].slots;
    for (size_t local = 0; local < slots.size(); ++local) {
      RankPlacement rank;
      rank.rank = static_cast<int>(plan.ranks.size());
      rank.host = selected[node].host;
      rank.slot = slots[local];
      rank.localRank = static_cast<int>(local);
      rank.localSize = static_cast<int>(slots.size());
      rank.nodeRank = static_cast<int>(node);
      rank.nodeCount = static_cast<int>(selected.size());
      plan.ranks.push_back(std::move(rank));
    }
  }
  return plan;
}

bool allLoopback(const LaunchPlan& plan) {
  for (const auto& node : plan.nodes)
    if (!isLoopbackHost(node.host)) return false;
  return true;
}

std::string defaultMasterAddress(const LaunchPlan& plan) {
  if (allLoopback(plan)) {
    const std::string& first = plan.nodes.front().host;
    return first == "localhost" || first == "::1" ? "127.0.0.1" : first;
  }
  ifaddrs* interfaces = nullptr;
  std::string found;
  if (getifaddrs(&interfaces) == 0) {
    for (ifaddrs* i = interfaces; i != nullptr && found.empty(); i = i->ifa_next) {
      if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
      if ((i->ifa_flags & IFF_UP) == 0 || (i->ifa_flags & IFF_LOOPBACK) != 0) continue;
      char text[INET_ADDRSTRLEN];
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, text,
                sizeof(text));
      found = text;
    }
    freeifaddrs(interfaces);
  }
  if (found.empty())
    throw Error("cannot find a network address for the coordinator: give --master_addr");
  return found;
}

}  // namespace ds::launcher
