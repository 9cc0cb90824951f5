// What a GPT job allocates on each rank beyond its model states, from the config alone: the
// sample index of the train and validation splits (built whole by every rank before the first
// step) and the activations of one micro-batch, for training and for evaluation (which runs
// micro-batch by micro-batch keeping one block: never more than training). Checked when the
// config is parsed, so `ds-config check` and ds-launch refuse a job that cannot allocate them
// instead of every rank running out of memory. The model states are the engine's check.
#pragma once

#include "common/memory_budget.h"
#include "runtime/config/batch_size.h"
#include "runtime/config/neox_config.h"

namespace ds::runtime {

struct GptJobMemory {
  double trainSamples = 0, validSamples = 0;  // entries of the sample index
  double sampleIndex = 0;                     // bytes
  double trainActivations = 0;                // bytes, one micro-batch forward and backward
  double evalActivations = 0;                 // bytes, one block of one evaluation micro-batch
  double total() const;
};

// Lower bounds: what the sample tables and the kept activations take at the least (the document
// order, which depends on the data, and the workspaces are left out).
GptJobMemory estimateGptJobMemory(const GptTrainConfig& train, const BatchConfig& batch);

// The floats a GPT keeps for the backward pass of `samples` sequences, in bytes (the rows of
// Gpt::peakActivationBytes that grow with the batch; its workspaces are left out), on one of
// `modelParallel` model ranks: the sliced tensors (q/k/v, the MLP's, attention's statistics)
// divide by it, the replicated rows (a block's input, its norms' outputs) only with
// model.sequenceParallel. With `sequenceRanks` u > 1 (DeepSpeed-Ulysses) a rank holds T / u of
// each sample's positions, and its context twice (in its rows and in its heads' layout).
double gptActivationBytes(const GptConfig& model, double samples, bool checkpointing,
                          int modelParallel = 1, int sequenceRanks = 1);

// The bytes a pass needs beside the kept activations (Gpt's GptActivations and BlockWorkspace),
// for the same shape: the scratch block an evaluation runs each block in, the blocks' shared
// workspace, and the head's buffers (the logits of up to 1024 rows, the tied embedding's gradient).
double gptPassWorkspaceBytes(const GptConfig& model, double samples, bool checkpointing,
                             int modelParallel = 1, int sequenceRanks = 1);

// Throws ds::Error naming the keys that drive the largest part and what to change when the
// estimate is more than `budget` has left.
void checkGptJobMemory(const GptTrainConfig& train, const BatchConfig& batch,
                       const MemoryBudget& budget);

}  // namespace ds::runtime
