// The GPT job's train and validation samples from its data keys: data-path cut by split, or
// train-/valid-data-paths blended by their weights (runtime/data/blended_samples.h). Samples
// counts are NeoX's: train-iters global batches, and eval-iters global batches per evaluation.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "runtime/config/neox_config.h"
#include "runtime/data/gpt_samples.h"
#include "runtime/data/indexed_dataset.h"

namespace ds::worker {

struct GptData {
  std::unique_ptr<runtime::IndexedDataset> dataset;  // data-path's; null when blended
  std::unique_ptr<runtime::TokenSamples> train;
  std::unique_ptr<runtime::TokenSamples> valid;  // null: no validation data
  std::string description;                       // what the "data:" line prints
};

GptData openGptData(const runtime::GptTrainConfig& gpt, size_t seqLength, uint64_t globalBatch);

}  // namespace ds::worker
