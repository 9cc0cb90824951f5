// One communicator per axis group this rank is in, then the pairs with its neighbouring stages.
#include "runtime/parallel/topology_groups.h"

#include <algorithm>
#include <string>

#include "common/error.h"

namespace ds::runtime {
namespace {

std::unique_ptr<Communicator> axisGroup(GroupFactory& factory,
                                        const PipeModelDataTopology& topology, int rank,
                                        const std::string& axis) {
  for (const std::vector<int>& ranks : topology.getAxisCommLists(axis))
    if (std::find(ranks.begin(), ranks.end(), rank) != ranks.end())
      return factory.group(ranks, axis);
  throw Error("topology groups: rank " + std::to_string(rank) + " is in no \"" + axis +
              "\" group");  // unreachable for a rank the topology has checked
}

std::unique_ptr<Communicator> stagePair(GroupFactory& factory, int lowerRank, int upperRank,
                                        int lowerStage) {
  return factory.group({lowerRank, upperRank}, "pipe stages " + std::to_string(lowerStage) + "-" +
                                                   std::to_string(lowerStage + 1));
}

}  // namespace

TopologyGroups buildTopologyGroups(GroupFactory& factory, const PipeModelDataTopology& topology) {
  if (factory.worldSize() != topology.worldSize())
    throw Error("topology groups: pipe " + std::to_string(topology.pipeParallelSize()) +
                " x data " + std::to_string(topology.dataParallelSize()) + " x model " +
                std::to_string(topology.modelParallelSize()) + " is " +
                std::to_string(topology.worldSize()) + " ranks, but the job has " +
                std::to_string(factory.worldSize()));
  const int rank = factory.rank();
  TopologyGroups groups;
  groups.data = axisGroup(factory, topology, rank, "data");
  groups.model = axisGroup(factory, topology, rank, "model");
  groups.pipe = axisGroup(factory, topology, rank, "pipe");
  // The pair below before the pair above: stage s joins (s-1, s) first, and stage s-1 reaches
  // (s-1, s) after its own lower pair, so the joins chain up from stage 0 instead of waiting
  // on each other.
  const int stage = topology.stageOf(rank);
  const PipeNeighbours neighbours = topology.pipeNeighbours(rank);
  if (neighbours.prev) groups.prevStage = stagePair(factory, *neighbours.prev, rank, stage - 1);
  if (neighbours.next) groups.nextStage = stagePair(factory, rank, *neighbours.next, stage);
  const int stages = topology.pipeParallelSize();
  if (stages > 1 && (stage == 0 || stage == stages - 1))
    groups.tied = factory.group(
        {topology.stageToGlobal(rank, 0), topology.stageToGlobal(rank, stages - 1)}, "pipe tied");
  return groups;
}

}  // namespace ds::runtime
