// GPT-NeoX's dataset blending maths (megatron/data/data_utils.py and helpers.cpp): how many samples
// each dataset of train-/valid-/test-data-paths gets from its weight, the weights
// weight-by-num-documents derives from document counts, and the blended order (which dataset,
// which of its samples) at every position. Pure functions of their arguments, so every rank and a
// resumed run agree; reading the datasets is blended_samples.h's job.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ds::runtime {

// One split's datasets as the config gives them: prefixes and one weight each (NeoX's default is
// 1.0 for each when no weights are given).
struct DataBlend {
  std::vector<std::string> paths;
  std::vector<double> weights;
  // -label-data-paths: one label dataset per path (runtime/data/label_dataset.h), or none.
  std::vector<std::string> labelPaths;
};

struct BlendOptions {
  bool weightByNumDocuments = false;  // NeoX's weight-by-num-documents: replaces the weights
  double alpha = 1.0;                 // weighted-sampler-alpha
};

// NeoX's get_normalized_weights_and_num_samples: weights / sum, and per dataset
// ceil(samples x weight x 1.005) (the 0.5% spare NeoX keeps so a blend that drifts from its exact
// fractions still has samples). Weights of any finite size work (1e308 each is an even blend);
// throws ds::Error unless each is finite and non-negative and one is above 0.
struct WeightedSamples {
  std::vector<double> weights;
  std::vector<uint64_t> samples;
};
WeightedSamples normalizedWeightsAndSamples(const std::vector<double>& weights, uint64_t samples);

// NeoX's weights_by_num_docs: p_i = (n_i / N)^alpha normalised, times (1 - n_i / N), normalised
// again (up-samples small groups as alpha falls below 1); one dataset gets weight 1. Where every
// (n_i / N)^alpha underflows to 0 (NeoX's 0 / 0), the largest dataset gets the weight, the limit
// of the formula as alpha grows. Throws ds::Error when the datasets hold no documents, or one
// holds them all (every weight is then 0).
std::vector<double> weightsByNumDocuments(const std::vector<uint64_t>& documents, double alpha);

// The weights a split's datasets are sampled by: the config's, or with weight-by-num-documents
// weightsByNumDocuments' from each dataset's document count (NeoX counts its sequences).
std::vector<double> blendWeights(const DataBlend& blend, const BlendOptions& options,
                                 const std::vector<uint64_t>& documents);

// NeoX's build_blending_indices: position i goes to the dataset furthest behind its share,
// weight_d x max(i, 1) - taken_d, the lowest index on ties; its sample is the next unused one of
// that dataset. `weights` are normalised. At most 254 datasets (NeoX's uint8 index).
struct BlendPosition {
  uint8_t dataset;
  uint64_t sample;
};
std::vector<BlendPosition> blendingIndex(const std::vector<double>& weights, uint64_t size);

// Checks a split's paths and weights as NeoX's argument validation does, with `split` ("train",
// "valid", "test") naming the keys in messages: weights as many as paths, each finite and
// non-negative, not all zero. Fills in NeoX's equal weights when none were given.
void validateDataBlend(DataBlend& blend, const std::string& split);

}  // namespace ds::runtime
