// TrainingGridGroups and the refusal of grids the trainer cannot run yet (issue 28).
#include "worker/training_grid.h"

#include "runtime/parallel/topology.h"

namespace ds::worker {

std::string TrainingGrid::coordinates() const {
  return "(pipe " + std::to_string(pipeRank) + ", data " + std::to_string(dataRank) +
         ", model " + std::to_string(modelRank) + ")";
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

std::string unsupportedParallelism(const runtime::GptTrainConfig& gpt,
                                   const runtime::DeepSpeedConfig& config) {
  // The flops profiler times one micro-batch's forward of the whole model; a stage holds part of
  // it and interleaves micro-batches.
  if (gpt.parallel.pipe > 1 && config.flopsProfiler.enabled)
    return "flops_profiler: not supported with pipe-parallel-size " +
           std::to_string(gpt.parallel.pipe) +
           " (a stage holds only its layers); disable it or set pipe-parallel-size to 1";
  return "";
}

}  // namespace ds::worker
