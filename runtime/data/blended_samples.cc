// BlendedSamples: NeoX's build order (weights, then each dataset's share, then the index over the
// sum of the shares) with our GptSamples as each dataset's sample source.
#include "runtime/data/blended_samples.h"

#include <algorithm>
#include <cstdio>

#include "common/error.h"
#include "runtime/data/label_dataset.h"

namespace ds::runtime {

BlendedSamples::BlendedSamples(const DataBlend& blend, const BlendOptions& options,
                               size_t seqLength, uint64_t samples, uint64_t seed,
                               const std::string& labelKey)
    : paths_(blend.paths), labelPaths_(blend.labelPaths) {
  if (blend.paths.empty()) throw Error("data blend: no datasets");
  if (!blend.labelPaths.empty() && blend.labelPaths.size() != blend.paths.size())
    throw Error(labelKey + ": " + std::to_string(blend.labelPaths.size()) + " label datasets for " +
                std::to_string(blend.paths.size()) + " datasets");
  for (const std::string& path : blend.paths)
    data_.push_back(std::make_unique<IndexedDataset>(path));
  for (size_t d = 0; d < blend.labelPaths.size(); ++d) {
    labels_.push_back(std::make_unique<IndexedDataset>(blend.labelPaths[d]));
    checkLabelsAligned(*data_[d], paths_[d], *labels_[d], blend.labelPaths[d], labelKey);
  }
  std::vector<uint64_t> documents;
  for (const auto& d : data_) documents.push_back(d->sequences());
  const WeightedSamples shares =
      normalizedWeightsAndSamples(blendWeights(blend, options, documents), samples);
  weights_ = shares.weights;
  uint64_t total = 0;
  for (size_t d = 0; d < data_.size(); ++d) {
    // NeoX builds a zero-weight dataset too (a whole epoch), and its blending rule can still
    // pick it once on a tie; one sample covers that pick.
    const uint64_t count = std::max<uint64_t>(shares.samples[d], 1);
    try {
      samples_.push_back(std::make_unique<GptSamples>(
          *data_[d], std::pair<size_t, size_t>{0, data_[d]->sequences()}, seqLength, count, seed,
          labels_.empty() ? nullptr : labels_[d].get()));
    } catch (const Error& e) {
      throw Error(paths_[d] + ": " + e.what());
    }
    total += shares.samples[d];
  }
  index_ = blendingIndex(weights_, total);
}

std::vector<int32_t> BlendedSamples::sample(size_t i) const {
  const BlendPosition p = index_.at(i);
  const GptSamples& from = *samples_.at(p.dataset);
  // The index's last positions can run past a dataset's share by a sample (the 0.5% spare covers
  // the positions a job reads); NeoX's GPT2Dataset wraps such an index around, so do we.
  return from.sample(static_cast<size_t>(p.sample % from.size()));
}

std::vector<int32_t> BlendedSamples::labels(size_t i) const {
  const BlendPosition p = index_.at(i);
  const GptSamples& from = *samples_.at(p.dataset);
  return from.labels(static_cast<size_t>(p.sample % from.size()));
}

std::string BlendedSamples::describe() const {
  std::string out;
  for (size_t d = 0; d < paths_.size(); ++d) {
    char text[160];
    std::snprintf(text, sizeof text, " (weight %.4g, %zu samples, %zu epochs)", weights_[d],
                  samples_[d]->size(), samples_[d]->epochs());
    out += (d ? ", " : "") + paths_[d] + text;
    if (!labelPaths_.empty()) out += " with labels " + labelPaths_[d];
  }
  return out;
}

}  // namespace ds::runtime
