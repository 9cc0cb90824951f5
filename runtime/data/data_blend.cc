// The blending maths of data_blend.h, in NeoX's order of operations and in double precision, so
// that counts and ties fall exactly where NeoX's fall.
#include "runtime/data/data_blend.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"

namespace ds::runtime {

WeightedSamples normalizedWeightsAndSamples(const std::vector<double>& weights, uint64_t samples) {
  double sum = 0.0;
  for (double w : weights) sum += w;
  if (!(sum > 0.0)) throw Error("data weights: the weights sum to 0; give at least one above 0");
  WeightedSamples out;
  for (double w : weights) {
    const double weight = w / sum;
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
  double sum = 0.0;
  for (double w : blend.weights) {
    if (!std::isfinite(w) || w < 0.0)
      throw Error(weights + ": expected non-negative numbers, got " + std::to_string(w));
    sum += w;
  }
  if (!blend.paths.empty() && !(sum > 0.0))
    throw Error(weights +
                ": every weight is 0, so no dataset would be sampled; give at least one "
                "weight above 0");
}

}  // namespace ds::runtime
