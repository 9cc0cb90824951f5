// A rank's place on the GPT job's pipe x data x model grid (DeepSpeed's
// PipeModelDataParallelTopology) and the communicators of its groups, as the trainer uses them:
// the engine and the samples go by the DATA group, the stop vote by the world. Building the
// groups is runtime/parallel/topology_groups.h's; what runs over them is the trainer's.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/comm/comms_logger.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/group_factory.h"
#include "runtime/config/neox_config.h"
#include "runtime/engine/parallel_groups.h"
#include "runtime/parallel/topology_groups.h"

namespace ds::worker {

// What the trainer gets. Without pipe or model parallelism data is the world itself and the
// other groups are null, so such a job runs exactly as a data-parallel one always has.
struct TrainingGrid {
  runtime::Communicator* world = nullptr;  // every rank: the stop vote, the closing barrier
  runtime::Communicator* data = nullptr;   // the engine's (ZeRO), loss and evaluation averages
  runtime::Communicator* model = nullptr;  // tensor slices; null when model-parallel-size is 1
  runtime::Communicator* pipe = nullptr;   // this rank's pipeline; null with one stage
  // Send/recv pairs with the neighbouring stages; null at the ends and with one stage.
  runtime::Communicator* prevStage = nullptr;
  runtime::Communicator* nextStage = nullptr;
  // The first and last stage of this rank's (data, model) coordinate, which both hold the tied
  // word embeddings; null with one stage.
  runtime::Communicator* tied = nullptr;
  // DeepSpeed-Ulysses: the consecutive ranks that share each sample's positions (null without).
  runtime::Communicator* sequence = nullptr;
  // DeepSpeed-MoE's expert-parallel group: consecutive ranks splitting the experts, and the
  // expert-data group: the ranks of the same expert-parallel rank, which hold the same experts
  // (DeepSpeed's layout: world 16, ep 2 gives ep groups [0,1],[2,3],.. and expert-data groups
  // [0,2,..,14],[1,3,..,15]). Null without expert parallelism.
  runtime::Communicator* expert = nullptr;
  runtime::Communicator* expertData = nullptr;
  // ZeRO++'s node groups (runtime/engine/parallel_groups.h); null unless the job's ZeRO 3 uses
  // hpZ, or qgZ on nodes of equal size.
  runtime::Communicator* zeroNode = nullptr;
  runtime::Communicator* zeroCrossNode = nullptr;
  int pipeRank = 0, dataRank = 0, modelRank = 0, sequenceRank = 0;  // this rank's coordinates
  int pipeSize = 1, dataSize = 1, modelSize = 1, sequenceSize = 1;
  int expertRank = 0, expertSize = 1;
  // The stream of samples this rank reads, of how many: the data coordinate, shared by the
  // sequence ranks (the data group, whose engine averages gradients, holds all of them).
  int sampleRank() const { return dataRank / sequenceSize; }
  int sampleRanks() const { return dataSize / sequenceSize; }

  bool gridded() const { return pipeSize > 1 || modelSize > 1; }
  runtime::ParallelGroups parallelGroups() const {
    return {model, pipe, prevStage, nextStage, tied, expert, expertData, zeroNode, zeroCrossNode};
  }
  // "(pipe 1, data 0, model 1)": how logs and the launcher name a rank's place.
  std::string coordinates() const;
};

// Owns the grid's communicators (with the comms logger's wrappers when it is enabled) for as long
// as the trainer runs. Collective: every rank constructs it with the same configuration.
class TrainingGridGroups {
 public:
  // With `zero` (the job's ZeRO config) and `localSize` (this node's ranks): ZeRO++'s node groups
  // where the config asks for them.
  TrainingGridGroups(runtime::GroupFactory& factory, runtime::Communicator& world,
                     const runtime::ParallelConfig& parallel, runtime::CommsLogger* logger,
                     const runtime::ZeroConfig* zero = nullptr, int localSize = 0);
  const TrainingGrid& grid() const { return grid_; }

 private:
  runtime::Communicator* logged(std::unique_ptr<runtime::Communicator>& group);
  // The group of `size` consecutive world ranks this rank is in (into `group`, logged), its rank
  // and size in it.
  runtime::Communicator* consecutive(runtime::GroupFactory& factory, runtime::Communicator& world,
                                     int size, const char* name,
                                     std::unique_ptr<runtime::Communicator>& group, int& rank,
                                     int& groupSize);
  // Expert parallelism within the data group `data` (its ranks' job ranks by data coordinate).
  void expertGroups(runtime::GroupFactory& factory, const std::vector<int>& data, int dataRank,
                    int ep);
  // ZeRO++ on a data-parallel world: nodes of hpZ's size, or of the ranks per node where every
  // node has as many (DeepSpeed's qgZ takes the device count of each node).
  void zeroNodeGroups(runtime::GroupFactory& factory, runtime::Communicator& world,
                      const runtime::ZeroConfig& zero, int localSize);
  runtime::TopologyGroups groups_;
  std::unique_ptr<runtime::Communicator> sequence_, expert_, expertData_, zeroNode_, zeroCrossNode_;
  runtime::CommsLogger* logger_;
  std::vector<std::unique_ptr<runtime::LoggingCommunicator>> wrappers_;
  TrainingGrid grid_;
};

}  // namespace ds::worker
