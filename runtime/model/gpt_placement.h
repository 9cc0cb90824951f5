// Which part of a GPT a rank holds on a pipe x data x model grid: its tensor slices (model
// parallelism, Megatron's layout) and its pipeline stage's layers. The default is the whole model
// on one rank, which is what every job without model or pipeline parallelism builds.
#pragma once

#include "runtime/comm/communicator.h"

namespace ds::runtime {

struct GptPlacement {
  // Tensor slicing: this rank's coordinate on the model axis and the group its forward and
  // backward all-reduce over (null when modelSize is 1).
  int modelRank = 0;
  int modelSize = 1;
  Communicator* model = nullptr;
  // Pipeline stage: the layers [firstLayer, endLayer) in the full model's numbering (0 the
  // embedding, 1..L the blocks, L + 1 the head); endLayer -1 means through the head.
  int firstLayer = 0;
  int endLayer = -1;
  // DeepSpeed-Ulysses: the ranks that share each sample's positions (consecutive positions,
  // T / size each, in rank order), null or of size 1 without it.
  Communicator* sequence = nullptr;
  // DeepSpeed-MoE's expert parallelism: the ranks each MoE layer's experts are split over
  // (consecutive data-parallel ranks; each holds and computes 1 / size of them), null or of size
  // 1 without it.
  Communicator* experts = nullptr;
};

}  // namespace ds::runtime
