// makeWorldCommunicator: the per-job choice of collectives backend. Store keys are scoped by the
// membership epoch so a re-formed world never meets the old one's keys.
#include "worker/world_communicator.h"

#include <algorithm>

#include "runtime/comm/gloo_communicator.h"
#include "runtime/comm/hierarchical_communicator.h"
#include "runtime/comm/shm_communicator.h"
#include "runtime/common/error.h"

namespace ds::worker {

WorldCommunicator makeWorldCommunicator(const JoinResult& join, runtime::Store& store,
                                        const std::string& bindAddress,
                                        const std::string& backend) {
  const std::string prefix = "epoch" + std::to_string(join.epoch);
  // Every rank sees the same node sizes, so every rank makes the same choice.
  const bool uniform = !join.nodeSizes.empty() &&
                       std::all_of(join.nodeSizes.begin(), join.nodeSizes.end(),
                                   [&](int size) { return size == join.nodeSizes.front(); });
  std::string choice = backend;
  if (choice == "auto")
    choice = join.nodeCount == 1 ? "shm" : uniform && join.localSize > 1 ? "hierarchical" : "gloo";
  if (choice == "shm") {
    if (join.nodeCount != 1)
      throw Error("comm_backend \"shm\" needs every rank on one host; this job spans " +
                  std::to_string(join.nodeCount) + " hosts (use \"auto\" or \"hierarchical\")");
    return {std::make_unique<runtime::ShmCommunicator>(runtime::ShmCommunicator::join(
                store, prefix + "/shm/world", join.rank, join.worldSize)),
            "shared memory"};
  }
  runtime::GlooOptions options;
  options.bindAddress = bindAddress;
  options.storePrefix = prefix + "/gloo/world";
  if (choice == "hierarchical") {
    if (!uniform)
      throw Error("comm_backend \"hierarchical\" needs the same number of ranks on every host");
    runtime::NodeLayout layout{
        join.rank, join.worldSize, join.localRank, join.localSize, join.nodeRank, join.nodeCount,
        true};
    return {std::make_unique<runtime::HierarchicalCommunicator>(store, prefix + "/world", layout,
                                                                options),
            "hierarchical (shared memory + gloo)"};
  }
  return {std::make_unique<runtime::GlooCommunicator>(store, join.rank, join.worldSize, options),
          "gloo (tcp)"};
}

}  // namespace ds::worker
