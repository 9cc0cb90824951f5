// The peak resident memory of one training rank, predicted from the config alone (what
// `ds-config memory` prints and the launcher's pre-flight checks before any rank starts): the
// process's baseline, the model states that stay resident at its ZeRO stage and offload setting,
// the engine's buffers, the GPT's kept activations, and the transient peaks of construction and
// of the closing sample. Each term is one function, so a change in what the engine holds (e.g.
// partitioned construction) is one edit here. Not here: the sample index (gpt_job_memory.h).
#pragma once

#include <string>

#include "runtime/config/ds_config.h"
#include "runtime/model/gpt_config.h"

namespace ds::runtime {

// The process before any model exists: the binaries, shared libraries, thread stacks and the
// allocator's arenas. Measured: ds-worker training a 1-layer, hidden-64 GPT (1.2 MiB of states)
// peaks at 37.2 MiB VmHWM (x86-64 Release, glibc 2.36); 35 MiB of it is not the model's.
constexpr double kProcessBaselineBytes = 35.0 * 1024 * 1024;

// What the estimate needs of a model: its size and the sizes that bound the engine's buffers.
struct ModelShape {
  double parameters = 0;     // elements in all
  double largestLayer = 0;   // elements of the largest layer (a GPT block, the embedding, the head)
  double largestTensor = 0;  // elements of the largest tensor
  double activationBytes = 0;  // one micro-batch's kept activations and the pass's workspaces
  // MoE: the experts' elements among `parameters` (all of them) and the expert-parallel size:
  // a rank holds 1 / expertParallel of them, partitioned over world / expertParallel ranks.
  double expertParameters = 0;
  int expertParallel = 1;
};

// A GPT's shape from its config (weights and biases of the standard block; within a fraction of a
// percent of Gpt::parameterCount, checked in test_rank_peak_memory.cc) for `microBatch` samples.
ModelShape gptModelShape(const GptConfig& model, double microBatch);

struct RankPeakMemory {
  double baseline = 0;
  // The model states resident on this rank (with offload: what stays in memory).
  double parameters = 0, gradients = 0, masterWeights = 0, optimizerStates = 0;
  double swapSlots = 0;      // offload_optimizer nvme: buffer_count sub-groups' master and state
  double buffers = 0;        // reduce buckets, layer scratch, gathered layers, sub-group gradients
  double activations = 0;    // one micro-batch's kept activations and the pass's workspaces
  double construction = 0;   // held beside the states while the engine is built
  double closingSample = 0;  // held beside the states while the trainer samples at its end
  double resident() const {
    return parameters + gradients + masterWeights + optimizerStates + swapSlots;
  }
  // The peak: the baseline, the resident states and the largest of the three phases' extras.
  double peak() const;
  std::string peakPhase() const;  // "construction", "training" or "closing sample"
};

RankPeakMemory estimateRankPeakMemory(const DeepSpeedConfig& config, const ModelShape& model,
                                      int world);

// The phases' transient terms, kept apart so a change in construction or in the sample is one
// edit: construction draws each rank's share straight into place (offload_param nvme: the working
// shard whole, before it moves out), the sample runs layer by layer.
double constructionTransientBytes(const DeepSpeedConfig& config, const ModelShape& model, int world,
                                  const RankPeakMemory& resident);
double closingSampleBytes(const DeepSpeedConfig& config, const ModelShape& model, int world);

}  // namespace ds::runtime
