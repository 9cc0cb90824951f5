// The communicators of one rank's place on a pipe x data x model grid, built through the
// GroupFactory (so over the store, with the backend that fits each group's hosts): the groups
// DeepSpeed's PipelineParallelGrid makes, each named after its axis for the tracker. It builds;
// what runs over the groups (ZeRO on data, slicing on model, the pipeline schedule) is elsewhere.
#pragma once

#include <memory>

#include "runtime/comm/communicator.h"
#include "runtime/comm/group_factory.h"
#include "runtime/parallel/topology.h"

namespace ds::runtime {

struct TopologyGroups {
  // Along each axis, the one group this rank is in (a one-rank group when the axis has size 1).
  // A member's group rank is its coordinate on that axis: lists are made of ascending ranks.
  std::unique_ptr<Communicator> data;   // gradients and ZeRO partitions ("data")
  std::unique_ptr<Communicator> model;  // tensor slices ("model")
  std::unique_ptr<Communicator> pipe;   // every stage of this rank's pipeline ("pipe")
  // Send/recv pairs with the neighbouring stages (group rank 0 is the lower stage); null on the
  // first stage (prevStage) and the last (nextStage). Named "pipe stages S-S+1".
  std::unique_ptr<Communicator> prevStage;
  std::unique_ptr<Communicator> nextStage;
  // The first and last stage of this rank's pipeline (DeepSpeed's tied-module group of the
  // embedding): made on those two stages when there is more than one, null elsewhere. Named
  // "pipe tied".
  std::unique_ptr<Communicator> tied;
};

// Every rank of the job calls this with the same topology, whose world must be the factory's
// (a mismatch is refused). Groups are made in one order on every rank (data, model,
// pipe, the neighbour pairs by stage, then the tied pair), which is what keeps their store keys matched and the
// joins free of deadlock.
TopologyGroups buildTopologyGroups(GroupFactory& factory, const PipeModelDataTopology& topology);

}  // namespace ds::runtime
