// What a GPT job's datasets must hold before any rank builds its sample tables, checked from their
// indexes alone: NeoX's sample counts, at least one sample in every split the job reads, and blend
// weights that make a blend. Building the samples is worker/gpt_data.h's job; it asks this first.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/config/neox_config.h"

namespace ds::runtime {

// NeoX's counts for a global batch of `globalBatch` samples: train-iters batches to train on, and
// eval-iters batches for each evaluation (every eval-interval iterations and one at the end).
struct GptSampleCounts {
  uint64_t train = 0;
  uint64_t valid = 0;
};
GptSampleCounts gptSampleCounts(const GptTrainConfig& gpt, uint64_t globalBatch);

// What a rank refuses about the datasets: a split or blended dataset too short for one sample of
// seq-length + 1 tokens, weight-by-num-documents over datasets that leave every weight 0, a label
// dataset that does not line up with its text, and a dataset that cannot be read. Throws ds::Error
// naming the key, the dataset and the fix. ds-config check and ds-launch ask it before any rank
// starts, each rank again. Returns the prefixes with no PREFIX.idx here, unchecked: a config may be
// checked away from its data (a login node), and a rank refuses a missing dataset by name anyway.
std::vector<std::string> checkGptJobData(const GptTrainConfig& gpt, uint64_t globalBatch);

}  // namespace ds::runtime
