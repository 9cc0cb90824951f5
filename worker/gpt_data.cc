// openGptData: NeoX's two ways to name data (build_train_valid_test_datasets for data-path,
// build_weighted_datasets + BlendableDataset for the lists), with the same sample counts.
#include "worker/gpt_data.h"

#include "runtime/config/gpt_job_data.h"
#include "runtime/data/blended_samples.h"

namespace ds::worker {

GptData openGptData(const runtime::GptTrainConfig& gpt, size_t seqLength, uint64_t globalBatch) {
  // The refusals ds-config check and ds-launch made before the job started, in their words; a
  // dataset missing here is refused by name below.
  runtime::checkGptJobData(gpt, globalBatch);
  GptData out;
  const auto [trainSamples, validSamples] = runtime::gptSampleCounts(gpt, globalBatch);
  if (gpt.blended()) {
    auto train = std::make_unique<runtime::BlendedSamples>(
        gpt.trainData, gpt.blend, seqLength, trainSamples, gpt.seed, "train-label-data-paths");
    out.description = "train blend of " + train->describe();
    out.train = std::move(train);
    if (gpt.evalIters > 0 && !gpt.validData.paths.empty()) {
      auto valid = std::make_unique<runtime::BlendedSamples>(
          gpt.validData, gpt.blend, seqLength, validSamples, gpt.seed, "valid-label-data-paths");
      out.description += "; validation blend of " + valid->describe();
      out.valid = std::move(valid);
    } else {
      out.description += "; no validation data";
    }
    return out;
  }
  out.dataset = std::make_unique<runtime::IndexedDataset>(gpt.dataPath);
  const runtime::IndexedDataset& data = *out.dataset;
  const auto splits = runtime::splitDocuments(gpt.split, data.documents());
  auto train =
      std::make_unique<runtime::GptSamples>(data, splits[0], seqLength, trainSamples, gpt.seed);
  out.description = gpt.dataPath + ", " + std::to_string(data.documents()) +
                    " documents; train samples " + std::to_string(train->size()) + " (" +
                    std::to_string(train->epochs()) + " epochs)";
  out.train = std::move(train);
  if (gpt.evalIters > 0 && splits.size() > 1 && splits[1].second > splits[1].first)
    out.valid =
        std::make_unique<runtime::GptSamples>(data, splits[1], seqLength, validSamples, gpt.seed);
  else
    out.description += ", no validation split";
  return out;
}

}  // namespace ds::worker
