// makeWorldCommunicator: the per-job choice of collectives backend. Store keys are scoped by the
// membership epoch so a re-formed world never meets the old one's keys.
#include "worker/world_communicator.h"

#include "runtime/comm/gloo_communicator.h"
#include "runtime/comm/shm_communicator.h"

namespace ds::worker {

WorldCommunicator makeWorldCommunicator(const JoinResult& join, runtime::Store& store,
                                        const std::string& bindAddress) {
  const std::string prefix = "epoch" + std::to_string(join.epoch);
  // The hierarchical shared-memory + Gloo path for multi-host jobs is the collectives issue's
  // next step.
  if (join.nodeCount == 1)
    return {std::make_unique<runtime::ShmCommunicator>(runtime::ShmCommunicator::join(
                store, prefix + "/shm/world", join.rank, join.worldSize)),
            "shared memory"};
  runtime::GlooOptions options;
  options.bindAddress = bindAddress;
  options.storePrefix = prefix + "/gloo/world";
  return {std::make_unique<runtime::GlooCommunicator>(store, join.rank, join.worldSize, options),
          "gloo (tcp)"};
}

}  // namespace ds::worker
