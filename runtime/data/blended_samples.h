// Samples blended from several indexed datasets, as GPT-NeoX's BlendableDataset over the
// GPT2Datasets of train-/valid-/test-data-paths: each dataset gets its own GptSamples (all its
// documents, its share of the samples, the job's seed) and the blending index of data_blend.h
// says which dataset's which sample sits at each position. Deterministic in (datasets, weights,
// seq-length, sample count, seed), so a resumed run reads the same sequence from its iteration on.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/data/data_blend.h"
#include "runtime/data/gpt_samples.h"
#include "runtime/data/indexed_dataset.h"

namespace ds::runtime {

class BlendedSamples final : public TokenSamples {
 public:
  // At least `samples` samples of seqLength + 1 tokens. Throws ds::Error naming the dataset that
  // cannot be read or holds too few tokens for one sample.
  // With blend.labelPaths, each dataset's label dataset follows its samples; one that does not
  // line up with its text is an error naming `labelKey` and both prefixes.
  BlendedSamples(const DataBlend& blend, const BlendOptions& options, size_t seqLength,
                 uint64_t samples, uint64_t seed, const std::string& labelKey = "label-data-paths");

  size_t size() const override { return index_.size(); }
  std::vector<int32_t> sample(size_t i) const override;
  bool hasLabels() const override { return !labels_.empty(); }
  std::vector<int32_t> labels(size_t i) const override;
  // Which dataset, and which of its samples, position i reads.
  BlendPosition position(size_t i) const { return index_.at(i); }
  const std::vector<double>& weights() const { return weights_; }
  std::string describe() const;  // one "prefix (weight, samples, epochs)" per dataset

 private:
  std::vector<std::string> paths_, labelPaths_;
  std::vector<std::unique_ptr<IndexedDataset>> data_;
  std::vector<std::unique_ptr<IndexedDataset>> labels_;  // one per dataset, or none
  std::vector<std::unique_ptr<GptSamples>> samples_;     // after data_ and labels_: they read them
  std::vector<double> weights_;
  std::vector<BlendPosition> index_;
};

}  // namespace ds::runtime
