// The axes of a pipe x data x model grid other than the data axis the engine partitions over:
// what the engine needs to agree on one step across every rank that holds a part of the same
// model (the global gradient norm, fp16 overflow), and the pipeline's point-to-point and tied-weight
// groups that Engine::trainBatch runs its schedule over. Null where that axis has size 1.
#pragma once

#include "runtime/comm/communicator.h"

namespace ds::runtime {

struct ParallelGroups {
  Communicator* model = nullptr;  // this rank's tensor-slicing group
  Communicator* pipe = nullptr;   // every stage of this rank's pipeline
  // Send/recv pairs with the neighbouring stages (group rank 0 the lower stage): null on the first
  // stage (prevStage) and the last (nextStage).
  Communicator* prevStage = nullptr;
  Communicator* nextStage = nullptr;
  // The first and last stage of this rank's pipeline (same data and model coordinates), which both
  // hold the tied word embeddings; null on the other stages.
  Communicator* tied = nullptr;
  // DeepSpeed-MoE's expert parallelism: the ranks this rank's MoE layers split their experts over
  // (ep group), and the ranks holding the same experts (expert-data group: the data group's ranks
  // of this rank's expert-parallel rank), over which the experts' gradients are reduced and their
  // states partitioned.
  Communicator* experts = nullptr;
  Communicator* expertData = nullptr;
  // ZeRO++ (stage 3, data parallelism only): this rank's node, the data group's ranks
  // [k h, (k + 1) h) for h the node size (hpZ's secondary partition group and qgZ's first hop),
  // and the data group's ranks of its place in every node (alike modulo h: qgZ's second hop).
  Communicator* zeroNode = nullptr;
  Communicator* zeroCrossNode = nullptr;
};

}  // namespace ds::runtime
