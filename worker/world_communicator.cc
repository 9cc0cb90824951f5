#include "worker/world_communicator.h"

namespace ds::worker {

runtime::GroupFactory makeGroupFactory(const JoinResult& join, runtime::Store& store,
                                       const std::string& bindAddress,
                                       ds::CommBackend backend) {
  runtime::GroupOptions options;
  options.backend = backend;
  options.bindAddress = bindAddress;
  options.storePrefix = "epoch" + std::to_string(join.epoch);
  return runtime::GroupFactory(store, {join.rank, join.nodeSizes}, options);
}

}  // namespace ds::worker
