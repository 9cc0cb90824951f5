// Resource selection exactly as DeepSpeed's runner does it (DEEPSPEED-SEMANTICS.md sections 3-4):
// NODE_SPEC parsing for --include/--exclude, the filter, the VISIBLE_DEVICES rule, --num_nodes and
// --num_gpus, with this project's decisions (PR #8239 include behaviour, clear errors instead of
// DeepSpeed's crashes, --num_gpus never inventing slots).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "launcher/hostfile.h"

namespace ds::launcher {

// One host and the slot ids (device ids) selected on it, in selection order.
struct NodeResources {
  std::string host;
  std::vector<int> slots;
  bool operator==(const NodeResources&) const = default;
};
using Resources = std::vector<NodeResources>;  // hostfile order

// Pool with every slot 0..N-1 of each hostfile entry.
Resources poolFromHostfile(const std::vector<HostEntry>& hosts);

// --include/--exclude grammar: NAME or NAME:SLOT,SLOT joined by '@'; pieces naming the same host
// merge (slot lists concatenated, de-duplicated, sorted). Result in first-appearance order.
// Throws ds::Error naming the flag and the bad piece.
Resources parseNodeSpecList(const std::string& spec, const std::string& flag);

// DeepSpeed's parse_resource_filter on a pool, with #8239's include behaviour: a bare include
// host means all its slots, an include slot the host lacks is an error.
Resources filterResources(const Resources& pool, const std::string& include,
                          const std::string& exclude);

struct SelectionRequest {
  std::string include;
  std::string exclude;
  int numNodes = -1;  // <= 0 after validation: every host (DeepSpeed keeps all for 0)
  int numGpus = -1;
  bool hostfileFound = true;
  std::string visibleDevices;  // CUDA_VISIBLE_DEVICES as ds-launch saw it
};

struct Selection {
  Resources resources;               // hosts with at least one slot, hostfile order
  std::vector<std::string> notices;  // what the VISIBLE_DEVICES rule did, for the user
  bool clearVisibleDevices = false;  // DeepSpeed removes the variable from the children's env
};

// Steps 4, 5, 7, 8, 11 and 12 of DeepSpeed's runner.main() on `pool` (the hostfile's, or
// localhost's when there is no hostfile). Throws ds::Error for every impossible request.
Selection selectResources(const Resources& pool, const SelectionRequest& request);

// "worker-0:0,1@worker-1:2" style description, for messages.
std::string describe(const Resources& resources);

}  // namespace ds::launcher
