// TrainingGridGroups; the grids the trainer cannot run are refused by the NeoX config parser.
#include "worker/training_grid.h"

#include "runtime/parallel/topology.h"

namespace ds::worker {

std::string TrainingGrid::coordinates() const {
  return "(pipe " + std::to_string(pipeRank) + ", data " + std::to_string(dataRank) +
         ", model " + std::to_string(modelRank) +
         (sequenceSize > 1 ? ", sequence " + std::to_string(sequenceRank) : std::string()) +
         (expertSize > 1 ? ", expert " + std::to_string(expertRank) : std::string()) + ")";
}

TrainingGridGroups::TrainingGridGroups(runtime::GroupFactory& factory,
                                       runtime::Communicator& world,
                                       const runtime::ParallelConfig& parallel,
                                       runtime::CommsLogger* logger)
    : logger_(logger) {
  grid_.world = &world;
  if (!parallel.gridded()) {
    // No new groups: the data group is the world, as before there was a grid.
    grid_.data = &world;
    grid_.dataRank = world.rank();
    grid_.dataSize = world.size();
    if (parallel.sequence > 1) {  // Ulysses: ranks [u * i, u * (i + 1)) share samples
      const int u = parallel.sequence, first = world.rank() / u * u;
      std::vector<int> members;
      for (int r = first; r < first + u; ++r) members.push_back(r);
      sequence_ = factory.group(members, "sequence");
      grid_.sequence = logged(sequence_);
      grid_.sequenceRank = world.rank() - first;
      grid_.sequenceSize = u;
    }
    if (parallel.expert > 1) {  // DeepSpeed's ep groups: ranks [ep * i, ep * (i + 1))
      const int ep = parallel.expert, first = world.rank() / ep * ep;
      std::vector<int> members;
      for (int r = first; r < first + ep; ++r) members.push_back(r);
      expert_ = factory.group(members, "expert");
      grid_.expert = logged(expert_);
      grid_.expertRank = world.rank() - first;
      grid_.expertSize = ep;
    }
    return;
  }
  const auto topology = runtime::PipeModelDataTopology::forWorld(
      factory.worldSize(), parallel.pipe, parallel.model);
  groups_ = runtime::buildTopologyGroups(factory, topology);
  const int rank = factory.rank();
  grid_.pipeRank = topology.getCoord(rank, "pipe");
  grid_.dataRank = topology.getCoord(rank, "data");
  grid_.modelRank = topology.getCoord(rank, "model");
  grid_.pipeSize = topology.pipeParallelSize();
  grid_.dataSize = topology.dataParallelSize();
  grid_.modelSize = topology.modelParallelSize();
  grid_.data = logged(groups_.data);
  if (grid_.modelSize > 1) grid_.model = logged(groups_.model);
  if (grid_.pipeSize > 1) grid_.pipe = logged(groups_.pipe);
  grid_.prevStage = logged(groups_.prevStage);
  grid_.nextStage = logged(groups_.nextStage);
  grid_.tied = logged(groups_.tied);
}

runtime::Communicator* TrainingGridGroups::logged(std::unique_ptr<runtime::Communicator>& group) {
  if (!group) return nullptr;
  if (!logger_) return group.get();
  wrappers_.push_back(std::make_unique<runtime::LoggingCommunicator>(*group, *logger_));
  return wrappers_.back().get();
}

}  // namespace ds::worker
