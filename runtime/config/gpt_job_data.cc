// checkGptJobData: the splits and blends worker/gpt_data.cc builds, in its order, with the checks
// their constructors make (runtime/data/gpt_samples.h, blended_samples.h) and no sample table.
#include "runtime/config/gpt_job_data.h"

#include <filesystem>
#include <memory>

#include "common/error.h"
#include "runtime/data/data_blend.h"
#include "runtime/data/gpt_samples.h"
#include "runtime/data/indexed_dataset.h"
#include "runtime/data/label_dataset.h"

namespace ds::runtime {
namespace {

bool foundHere(const std::string& prefix) {
  std::error_code ec;
  return std::filesystem::exists(prefix + ".idx", ec);
}

// checkSampleable, its message led by where the documents are and followed by the fix.
void checkSampleableAt(const IndexedDataset& data, std::pair<size_t, size_t> documents,
                       size_t seqLength, const std::string& where, const std::string& fix) {
  try {
    checkSampleable(data, documents, seqLength);
  } catch (const Error& e) {
    throw Error(where + ": " + e.what() + "; " + fix);
  }
}

// data-path cut by split: the train part, and the valid part when the job evaluates on it.
void checkSplits(const GptTrainConfig& gpt) {
  const IndexedDataset data(gpt.dataPath);
  const auto splits = splitDocuments(gpt.split, data.documents());
  const size_t seq = static_cast<size_t>(gpt.model.seqLength);
  auto part = [&](const char* name, std::pair<size_t, size_t> range) {
    return "data-path: " + gpt.dataPath + ": the " + name + " part of split \"" + gpt.split +
           "\" (documents " + std::to_string(range.first) + ".." + std::to_string(range.second) +
           " of " + std::to_string(data.documents()) + ")";
  };
  checkSampleableAt(data, splits[0], seq, part("train", splits[0]),
                    "lower seq-length, or give the train part of split more weight");
  if (gpt.evalIters > 0 && splits[1].second > splits[1].first)
    checkSampleableAt(data, splits[1], seq, part("valid", splits[1]),
                      "lower seq-length, give the valid part of split more weight, or set "
                      "eval-iters: 0");
}

// One split's blend, when all its datasets are here: its label datasets against their text, the
// weights, then each dataset's samples.
void checkBlend(const DataBlend& blend, const BlendOptions& options, const std::string& split,
                size_t seqLength, uint64_t samples) {
  std::vector<std::unique_ptr<IndexedDataset>> data;
  std::vector<uint64_t> documents;
  for (const std::string& path : blend.paths) {
    data.push_back(std::make_unique<IndexedDataset>(path));
    documents.push_back(data.back()->sequences());
  }
  for (size_t d = 0; d < blend.labelPaths.size(); ++d)
    checkLabelsAligned(*data[d], blend.paths[d], IndexedDataset(blend.labelPaths[d]),
                       blend.labelPaths[d], split + "-label-data-paths");
  normalizedWeightsAndSamples(blendWeights(blend, options, documents), samples);
  // Every dataset gets its own samples, a zero-weight one too (blended_samples.cc says why).
  for (size_t d = 0; d < data.size(); ++d)
    checkSampleableAt(*data[d], {0, data[d]->sequences()}, seqLength,
                      split + "-data-paths: " + blend.paths[d],
                      "lower seq-length, or remove the dataset from " + split + "-data-paths");
}

}  // namespace

GptSampleCounts gptSampleCounts(const GptTrainConfig& gpt, uint64_t globalBatch) {
  const uint64_t evaluations = static_cast<uint64_t>(gpt.trainIters / gpt.evalInterval + 1);
  return {static_cast<uint64_t>(gpt.trainIters) * globalBatch,
          static_cast<uint64_t>(gpt.evalIters) * globalBatch * evaluations};
}

std::vector<std::string> checkGptJobData(const GptTrainConfig& gpt, uint64_t globalBatch) {
  if (!gpt.blended()) {
    if (!foundHere(gpt.dataPath)) return {gpt.dataPath};
    checkSplits(gpt);
    return {};
  }
  const GptSampleCounts counts = gptSampleCounts(gpt, globalBatch);
  const size_t seq = static_cast<size_t>(gpt.model.seqLength);
  std::vector<std::string> missing;
  auto check = [&](const DataBlend& blend, const std::string& split, uint64_t samples) {
    bool complete = true;
    for (const auto* prefixes : {&blend.paths, &blend.labelPaths})
      for (const std::string& prefix : *prefixes)
        if (!foundHere(prefix)) {
          missing.push_back(prefix);
          complete = false;
        }
    if (complete) checkBlend(blend, gpt.blend, split, seq, samples);
  };
  check(gpt.trainData, "train", counts.train);
  if (gpt.evalIters > 0 && !gpt.validData.paths.empty())
    check(gpt.validData, "valid", counts.valid);
  return missing;
}

}  // namespace ds::runtime
