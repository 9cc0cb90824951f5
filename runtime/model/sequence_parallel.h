// Sequence parallelism in the GPT, both of its kinds.
//
// Megatron's (NeoX's sequence-parallel, Korthikanti et al. 2022):
// with tensor slicing over t model ranks, each rank keeps 1/t of the rows (of the batch's
// samples x seq tokens, in order) for the parts a slice would replicate: the norms, residual sums
// and hidden dropouts, and what they keep for the backward. A column-parallel product's input is
// all-gathered first (and again in the backward, for its weight gradient); a row-parallel
// product's partial sums are reduce-scattered instead of all-reduced, so the traffic is that of
// tensor slicing alone. The replicated parameters whose gradients a rank then computes from its
// rows only (the norms, the row-parallel biases) have them summed over the group.
//
// DeepSpeed-Ulysses (sequence_parallel_size, Jacobs et al. 2023): u ranks share each sample's
// positions, T / u each, and hold the whole model; everything runs on a rank's own positions but
// attention, for which q/k/v move from position-split to head-split (every position of 1/u of the
// heads) and the context back, each move one all-to-all over the sequence ranks.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

#include "runtime/comm/communicator.h"
#include "runtime/model/gpt_block.h"

namespace ds::runtime::gpt {

// The shape of a training pass over `samples` x `seq` rows with this model rank's share of them
// (`group` the model group); wholeRows(samples, seq) where `group` is null. The rows must divide
// by the group's size (GptConfig::validateModelParallel asks it of seq-length).
BlockShape sequenceShard(size_t samples, size_t seq, Communicator* group);

// All N rows of width `width` from each rank's local rows `x`: gathered into `full` over
// s.sequence, or x itself where every row is here.
const float* gatherShards(kernels::Accelerator& acc, const float* x,
                          kernels::DeviceArray<float>& full, const BlockShape& s, size_t width);

// The model group's sum of `partial` [N, width] (a row-parallel product's partial sums, or a
// column-parallel input's gradient): this rank's rows of it in `local` (sequence parallel), or
// all of them in place (`model` may be null: nothing to sum). Returns where the sum is.
float* reduceToShards(kernels::Accelerator& acc, float* partial, kernels::DeviceArray<float>& local,
                      const BlockShape& s, size_t width, Communicator* model);

// Ulysses' moves. A row of `width` columns is made of column groups (q, k, v; or the context),
// each of `width` columns split evenly into the u ranks' heads. Position layout: this rank's
// s.seq positions of each sample (rows b * s.seq + p); head layout: every position of each sample
// (rows b * s.fullSeq + t), the rank's share of each group, groups in order.
void toHeadLayout(kernels::Accelerator& acc, const float* rows, float* heads, const BlockShape& s,
                  const std::vector<ColumnGroup>& groups, size_t width,
                  kernels::DeviceArray<float>& scratch);
void toPositionLayout(kernels::Accelerator& acc, const float* heads, float* rows,
                      const BlockShape& s, const std::vector<ColumnGroup>& groups, size_t width,
                      kernels::DeviceArray<float>& scratch);

// The gradients of replicated tensors that a rank computes from its own rows: what they held is
// set aside and they are zeroed on construction, so that the pass adds this micro-batch's partial
// sums alone; finish() sums those over the group and adds them to what was set aside. Without
// sequence parallelism it does nothing.
class ShardedGradients {
 public:
  explicit ShardedGradients(Communicator* sequence) : sequence_(sequence) {}
  void add(float* grad, size_t count);  // null grads are skipped
  void finish();

 private:
  Communicator* sequence_;
  std::vector<std::pair<float*, size_t>> tensors_;
  std::vector<float> saved_, sums_;
};

}  // namespace ds::runtime::gpt
