// TrainingGridGroups; the grids the trainer cannot run are refused by the NeoX config parser.
#include "worker/training_grid.h"

#include "runtime/parallel/topology.h"

namespace ds::worker {

std::string TrainingGrid::coordinates() const {
  return "(pipe " + std::to_string(pipeRank) + ", data " + std::to_string(dataRank) + ", model " +
         std::to_string(modelRank) +
         (sequenceSize > 1 ? ", sequence " + std::to_string(sequenceRank) : std::string()) +
         (expertSize > 1 ? ", expert " + std::to_string(expertRank) : std::string()) + ")";
}

TrainingGridGroups::TrainingGridGroups(runtime::GroupFactory& factory, runtime::Communicator& world,
                                       const runtime::ParallelConfig& parallel,
                                       runtime::CommsLogger* logger,
                                       const runtime::ZeroConfig* zero, int localSize)
    : logger_(logger) {
  grid_.world = &world;
  // ZeRO++ with a grid is refused by the engine; its groups are the data-parallel world's.
  if (zero && zero->stage == 3 && zero->zeroPlusPlus() && !parallel.gridded() &&
      parallel.expert <= 1 && parallel.sequence <= 1)
    zeroNodeGroups(factory, world, *zero, localSize);
  if (!parallel.gridded()) {
    // No new groups: the data group is the world, as before there was a grid.
    grid_.data = &world;
    grid_.dataRank = world.rank();
    grid_.dataSize = world.size();
    // Ulysses: ranks [u i, u (i + 1)) share samples; DeepSpeed's ep groups alike.
    if (parallel.sequence > 1)
      grid_.sequence = consecutive(factory, world, parallel.sequence, "sequence", sequence_,
                                   grid_.sequenceRank, grid_.sequenceSize);
    if (parallel.expert > 1) {
      std::vector<int> data(static_cast<size_t>(world.size()));
      for (int r = 0; r < world.size(); ++r) data[static_cast<size_t>(r)] = r;
      expertGroups(factory, data, world.rank(), parallel.expert);
    }
    return;
  }
  const auto topology =
      runtime::PipeModelDataTopology::forWorld(factory.worldSize(), parallel.pipe, parallel.model);
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
  if (parallel.expert > 1) {  // within this rank's data group: its ranks by data coordinate
    std::vector<int> data(static_cast<size_t>(grid_.dataSize));
    for (int q = 0; q < factory.worldSize(); ++q)
      if (topology.getCoord(q, "pipe") == grid_.pipeRank &&
          topology.getCoord(q, "model") == grid_.modelRank)
        data[static_cast<size_t>(topology.getCoord(q, "data"))] = q;
    expertGroups(factory, data, grid_.dataRank, parallel.expert);
  }
}

void TrainingGridGroups::expertGroups(runtime::GroupFactory& factory, const std::vector<int>& data,
                                      int dataRank, int ep) {
  // DeepSpeed's layout: ep groups of consecutive data ranks, expert-data groups of the data ranks
  // alike modulo ep. Every rank makes its ep group first, then its expert-data group.
  std::vector<int> same, spread;
  for (int d = dataRank / ep * ep; d < dataRank / ep * ep + ep; ++d)
    same.push_back(data[static_cast<size_t>(d)]);
  for (int d = dataRank % ep; d < static_cast<int>(data.size()); d += ep)
    spread.push_back(data[static_cast<size_t>(d)]);
  expert_ = factory.group(same, "expert");
  grid_.expert = logged(expert_);
  grid_.expertRank = dataRank % ep;
  grid_.expertSize = ep;
  expertData_ = factory.group(spread, "expert_data");
  grid_.expertData = logged(expertData_);
}

void TrainingGridGroups::zeroNodeGroups(runtime::GroupFactory& factory,
                                        runtime::Communicator& world,
                                        const runtime::ZeroConfig& zero, int localSize) {
  int size = static_cast<int>(zero.hpzPartitionSize);
  if (size <= 1) {
    if (!zero.quantizedGradients) return;
    // Every rank must make the same groups: the nodes' sizes agreed on first.
    float sizes[2] = {static_cast<float>(localSize), -static_cast<float>(localSize)};
    world.allReduce(sizes, 2, DType::F32, runtime::ReduceOp::Max);
    if (sizes[0] != -sizes[1] || localSize <= 0 || world.size() % localSize != 0) return;
    if (localSize >= world.size()) return;  // one node: qgZ falls back to the plain reduce-scatter
    size = localSize;
  }
  int place = 0, groupSize = 0;
  grid_.zeroNode = consecutive(factory, world, size, "zero_node", zeroNode_, place, groupSize);
  std::vector<int> cross;
  for (int r = world.rank() % size; r < world.size(); r += size) cross.push_back(r);
  zeroCrossNode_ = factory.group(cross, "zero_cross_node");
  grid_.zeroCrossNode = logged(zeroCrossNode_);
}

runtime::Communicator* TrainingGridGroups::consecutive(
    runtime::GroupFactory& factory, runtime::Communicator& world, int size, const char* name,
    std::unique_ptr<runtime::Communicator>& group, int& rank, int& groupSize) {
  const int first = world.rank() / size * size;
  std::vector<int> members;
  for (int r = first; r < first + size; ++r) members.push_back(r);
  group = factory.group(members, name);
  rank = world.rank() - first;
  groupSize = size;
  return logged(group);
}

runtime::Communicator* TrainingGridGroups::logged(std::unique_ptr<runtime::Communicator>& group) {
  if (!group) return nullptr;
  if (!logger_) return group.get();
  wrappers_.push_back(std::make_unique<runtime::LoggingCommunicator>(*group, *logger_));
  return wrappers_.back().get();
}

}  // namespace ds::worker
