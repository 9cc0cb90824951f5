// GroupFactory: builds the communicator for the whole job and for any subgroup of its ranks
// (data-parallel groups, pipeline pairs), each with the backend that fits where its members run:
// all on one node -> shared memory; spread over nodes with the same number of members on each,
// more than one per node -> hierarchical; otherwise flat Gloo. The config's comm_backend
// overrides the choice (an impossible choice is a clear error).
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/comm_backend.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/shm_communicator.h"
#include "runtime/comm/store.h"

namespace ds::runtime {

// Where the job's ranks run: numbered node by node, nodeSizes[n] ranks on node n.
struct JobLayout {
  int rank = 0;
  std::vector<int> nodeSizes;
};

struct GroupOptions {
  CommBackend backend = CommBackend::Auto;
  std::string bindAddress;  // this rank's address for Gloo's transport
  std::string storePrefix;  // unique per membership epoch
  std::chrono::milliseconds timeout{std::chrono::seconds(30)};
  size_t shmChunkBytes = ShmOptions{}.chunkBytes;  // tests make it small to cross chunks
};

class GroupFactory {
 public:
  // `store` must outlive every communicator made.
  GroupFactory(Store& store, JobLayout layout, GroupOptions options);

  int rank() const { return layout_.rank; }
  int worldSize() const { return static_cast<int>(nodeOf_.size()); }

  std::unique_ptr<Communicator> world();
  // `ranks`: distinct job ranks in any order; the group's rank i is the i-th smallest. Every
  // member calls this with the same set, and members create their groups in the same order.
  // Ranks outside the set get nullptr and need not call. The group is named by its members
  // ("ranks 0,2"), after `label` where given ("data (ranks 0,2)"): what the tracker reports.
  std::unique_ptr<Communicator> group(std::vector<int> ranks, const std::string& label = "");

 private:
  std::unique_ptr<Communicator> build(const std::vector<int>& members, const std::string& prefix);
  Store& store_;
  JobLayout layout_;
  GroupOptions options_;
  std::vector<int> nodeOf_;                // job rank -> node
  std::map<std::string, int> madeBefore_;  // groups made per member set, for unique store keys
};

}  // namespace ds::runtime
