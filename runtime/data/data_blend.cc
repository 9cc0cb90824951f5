// The blending maths of data_blend.h, in NeoX's order of operations and in double precision, so
// that counts and ties fall exactly where NeoX's fall.
#include "runtime/data/data_blend.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"

namespace ds::runtime {

WeightedSamples normalizedWeightsAndSamples(const std::vector<double>& weights, uint64_t samples) {
  double largest = 0.0;
  for (double w : weights) {
    if (!std::isfinite(w) || w < 0.0)
      throw Error("data weights: expected finite non-negative weights, got " + std::to_string(w));
    largest = std::max(largest, w);
  }
  if (!(largest > 0.0))
    throw Error("data weights: the weights sum to 0; give at least one above 0");
  // Scaled so that the largest weight is in [0.5, 1): [1e308, 1e308] would otherwise sum to +inf
  // and normalise to zeros, leaving the blend without samples. A power of two scales exactly, so
  // each quotient is NeoX's w / sum to the last bit wherever NeoX's own sum is finite.
  int exponent = 0;
  std::frexp(largest, &exponent);
  double sum = 0.0;
  for (double w : weights) sum += std::ldexp(w, -exponent);
  WeightedSamples out;
  for (double w : weights) {
    const double weight = std::ldexp(w, -exponent) / sum;
    out.weights.push_back(weight);
    out.samples.push_back(
        static_cast<uint64_t>(std::ceil(static_cast<double>(samples) * weight * 1.005)));
  }
  return out;
}

std::vector<double> weightsByNumDocuments(const std::vector<uint64_t>& documents, double alpha) {
  if (documents.size() == 1) return {1.0};
  double total = 0.0;
  for (uint64_t n : documents) total += static_cast<double>(n);
  if (!(total > 0.0))
    throw Error("weight-by-num-documents: the datasets hold no documents to weight by");
  std::vector<double> share, smoothed;
  double smoothedSum = 0.0;
  for (uint64_t n : documents) {
    share.push_back(static_cast<double>(n) / total);
    smoothed.push_back(std::pow(share.back(), alpha));
    smoothedSum += smoothed.back();
  }
  if (!(smoothedSum > 0.0)) {
    // Every share^alpha underflowed (a large alpha: 0.5^1075 is 0), where NeoX divides 0 by 0.
    // The same ratios taken against the largest share keep that one at 1: as alpha grows the
    // weight goes to the largest dataset, which is the limit of NeoX's formula.
    const double largest = *std::max_element(share.begin(), share.end());
    smoothedSum = 0.0;
    for (size_t i = 0; i < share.size(); ++i) {
      smoothed[i] = std::pow(share[i] / largest, alpha);
      smoothedSum += smoothed[i];
    }
  }
  std::vector<double> weights;
  double sum = 0.0;
  for (size_t i = 0; i < documents.size(); ++i) {
    weights.push_back(smoothed[i] / smoothedSum * (1.0 - share[i]));
    sum += weights.back();
  }
  if (!(sum > 0.0))
    throw Error(
        "weight-by-num-documents: every document is in one dataset, so every weight is 0 "
        "(NeoX's rule weights each by 1 - its share); give train-data-weights instead");
  for (double& w : weights) w /= sum;
  return weights;
}

std::vector<double> blendWeights(const DataBlend& blend, const BlendOptions& options,
                                 const std::vector<uint64_t>& documents) {
  if (!options.weightByNumDocuments) return blend.weights;
  return weightsByNumDocuments(documents, options.alpha);
}

std::vector<BlendPosition> blendingIndex(const std::vector<double>& weights, uint64_t size) {
  if (weights.empty() || weights.size() > 254)
    throw Error("data blend: expected 1 to 254 datasets, got " + std::to_string(weights.size()));
  std::vector<uint64_t> taken(weights.size(), 0);
  std::vector<BlendPosition> index;
  index.reserve(size);
  for (uint64_t i = 0; i < size; ++i) {
    const double position = std::max(static_cast<double>(i), 1.0);
    size_t behind = 0;
    double most = weights[0] * position - static_cast<double>(taken[0]);
    for (size_t d = 1; d < weights.size(); ++d) {
      const double error = weights[d] * position - static_cast<double>(taken[d]);
      if (error > most) {  // strictly: a tie stays with the lower index, as in NeoX
        most = error;
        behind = d;
      }
    }
    index.push_back({static_cast<uint8_t>(behind), taken[behind]++});
  }
  return index;
}

void validateDataBlend(DataBlend& blend, const std::string& split) {
  const std::string paths = split + "-data-paths", weights = split + "-data-weights";
  if (blend.paths.size() > 254)
    throw Error(paths + ": at most 254 datasets (NeoX's limit), got " +
                std::to_string(blend.paths.size()));
  if (blend.weights.empty() && !blend.paths.empty()) blend.weights.assign(blend.paths.size(), 1.0);
  if (blend.weights.size() != blend.paths.size())
    throw Error(weights + ": expected one weight per entry of " + paths + " (" +
                std::to_string(blend.paths.size()) + "), got " +
                std::to_string(blend.weights.size()));
  // Any weight above 0, not a positive sum: huge weights sum to +inf and are still a blend.
  bool positive = false;
  for (double w : blend.weights) {
    if (!std::isfinite(w) || w < 0.0)
      throw Error(weights + ": expected non-negative numbers, got " + std::to_string(w));
    positive = positive || w > 0.0;
  }
  if (!blend.paths.empty() && !positive)
    throw Error(weights +
                ": every weight is 0, so no dataset would be sampled; give at least one "
                "weight above 0");
}

}  // namespace ds::runtime
