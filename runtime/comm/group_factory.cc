// Backend choice per group and the store key scheme (prefix / group id / how many times made).
#include "runtime/comm/group_factory.h"

#include <algorithm>
#include <numeric>
#include <set>

#include "common/error.h"
#include "common/fnv1a.h"
#include "runtime/comm/gloo_communicator.h"
#include "runtime/comm/hierarchical_communicator.h"
#include "runtime/comm/shm_communicator.h"

namespace ds::runtime {
namespace {

// A short stable id for a member set (FNV-1a over the ranks), so long rank lists keep short keys.
std::string groupId(const std::vector<int>& members) {
  uint64_t hash = kFnv1a64Offset;
  for (int rank : members) {  // little-endian bytes of each rank, whatever the host
    const auto r = static_cast<uint32_t>(rank);
    const unsigned char bytes[4] = {
        static_cast<unsigned char>(r), static_cast<unsigned char>(r >> 8),
        static_cast<unsigned char>(r >> 16), static_cast<unsigned char>(r >> 24)};
    hash = fnv1a64(bytes, sizeof(bytes), hash);
  }
  return std::to_string(members.size()) + "r-" + hex64(hash);
}

// "ranks 0,2,4": the members a tracked op names; a long list keeps its first and last four.
std::string groupName(const std::vector<int>& members) {
  constexpr size_t kEnds = 4;
  std::string name = "ranks ";
  for (size_t i = 0; i < members.size(); ++i) {
    const bool cut = members.size() > 2 * kEnds && i >= kEnds && i < members.size() - kEnds;
    if (cut && i == kEnds) name += "...,";
    if (!cut) name += std::to_string(members[i]) + (i + 1 < members.size() ? "," : "");
  }
  return name;
}

}  // namespace

GroupFactory::GroupFactory(Store& store, JobLayout layout, GroupOptions options)
    : store_(store), layout_(std::move(layout)), options_(std::move(options)) {
  if (layout_.nodeSizes.empty()) throw Error("communicator groups: the job layout has no nodes");
  for (size_t node = 0; node < layout_.nodeSizes.size(); ++node)
    nodeOf_.insert(nodeOf_.end(), layout_.nodeSizes[node], static_cast<int>(node));
  if (layout_.rank < 0 || layout_.rank >= static_cast<int>(nodeOf_.size()))
    throw Error("communicator groups: rank " + std::to_string(layout_.rank) +
                " is outside the job's " + std::to_string(nodeOf_.size()) + " ranks");
}

std::unique_ptr<Communicator> GroupFactory::world() {
  std::vector<int> all(nodeOf_.size());
  std::iota(all.begin(), all.end(), 0);
  std::unique_ptr<Communicator> comm = build(all, options_.storePrefix + "/world");
  comm->setGroupName("world");
  return comm;
}

std::unique_ptr<Communicator> GroupFactory::group(std::vector<int> ranks,
                                                  const std::string& label) {
  std::sort(ranks.begin(), ranks.end());
  if (ranks.empty()) throw Error("communicator group: no ranks given");
  if (std::adjacent_find(ranks.begin(), ranks.end()) != ranks.end())
    throw Error("communicator group: rank " +
                std::to_string(*std::adjacent_find(ranks.begin(), ranks.end())) +
                " is listed twice");
  if (ranks.front() < 0 || ranks.back() >= static_cast<int>(nodeOf_.size()))
    throw Error("communicator group: rank " +
                std::to_string(ranks.front() < 0 ? ranks.front() : ranks.back()) +
                " is not a rank of this job of " + std::to_string(nodeOf_.size()));
  if (!std::binary_search(ranks.begin(), ranks.end(), layout_.rank)) return nullptr;
  const std::string id = groupId(ranks);
  const int made = madeBefore_[id]++;
  std::unique_ptr<Communicator> comm =
      build(ranks, options_.storePrefix + "/group/" + id + "." + std::to_string(made));
  comm->setGroupName(label.empty() ? groupName(ranks) : label + " (" + groupName(ranks) + ")");
  return comm;
}

std::unique_ptr<Communicator> GroupFactory::build(const std::vector<int>& members,
                                                  const std::string& prefix) {
  // Members per node, in node order (members are sorted and ranks are numbered node by node).
  std::vector<int> nodes, perNode;
  NodeLayout layout;
  layout.size = static_cast<int>(members.size());
  for (int i = 0; i < layout.size; ++i) {
    const int node = nodeOf_[members[i]];
    if (nodes.empty() || nodes.back() != node) {
      nodes.push_back(node);
      perNode.push_back(0);
    }
    if (members[i] == layout_.rank) {
      layout.rank = i;
      layout.localRank = perNode.back();
      layout.nodeRank = static_cast<int>(nodes.size()) - 1;
    }
    ++perNode.back();
  }
  layout.nodeCount = static_cast<int>(nodes.size());
  layout.localSize = perNode[layout.nodeRank];
  layout.uniform = std::all_of(perNode.begin(), perNode.end(),
                               [&](int count) { return count == perNode.front(); });

  CommBackend choice = options_.backend;
  if (choice == CommBackend::Auto)
    choice = layout.nodeCount == 1                    ? CommBackend::Shm
             : layout.uniform && layout.localSize > 1 ? CommBackend::Hierarchical
                                                      : CommBackend::Gloo;
  ShmOptions shmOptions;
  shmOptions.timeout = options_.timeout;
  shmOptions.chunkBytes = options_.shmChunkBytes;
  if (choice == CommBackend::Shm) {
    if (layout.nodeCount != 1)
      throw Error(
          "comm_backend \"shm\" needs every rank of a group on one host; this group "
          "spans " +
          std::to_string(layout.nodeCount) + " hosts (use \"auto\" or \"hierarchical\")");
    return std::make_unique<ShmCommunicator>(
        ShmCommunicator::join(store_, prefix + "/shm", layout.rank, layout.size, shmOptions));
  }
  GlooOptions glooOptions;
  glooOptions.bindAddress = options_.bindAddress;
  glooOptions.storePrefix = prefix + "/gloo";
  glooOptions.timeout = options_.timeout;
  if (choice == CommBackend::Hierarchical) {
    if (!layout.uniform)
      throw Error(
          "comm_backend \"hierarchical\" needs the same number of a group's ranks on "
          "every host");
    return std::make_unique<HierarchicalCommunicator>(store_, prefix, layout, glooOptions,
                                                      shmOptions);
  }
  return std::make_unique<GlooCommunicator>(store_, layout.rank, layout.size, glooOptions);
}

}  // namespace ds::runtime
