// The autotuner's cost model: a step's time as a weighted sum of what a configuration makes each
// rank do (model flops, at an efficiency that grows with the rows of a micro-batch; bytes sent by
// its ZeRO stage and layout; micro-batch passes; elements its optimizer step updates; bytes
// swapped to NVMe). The weights start from
// priors and are refitted after every measured experiment (a ridge fit on relative errors, pulled
// towards the priors so that two measurements cannot swing it), so the order of the untried
// candidates improves as the tuning goes: DeepSpeed's model_based tuner, without XGBoost.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "launcher/autotuning/tuning_space.h"

namespace ds::launcher {

// What the model needs to know of the job's model; all zero for a program the tuner cannot see
// into (then only the passes count, and the model orders candidates by micro-batch).
struct ModelFacts {
  double parameters = 0;
  double flopsPerSample = 0;        // a training step's, the whole model
  double tokensPerSample = 1;       // rows of a sample in the model's matrix products
  double layerActivationBytes = 0;  // one sample's hidden states at one layer boundary
  int layers = 0;
};

constexpr size_t kCostTerms = 5;
// compute (flops), bytes sent, passes, elements the optimizer updates, bytes swapped to NVMe
using CostFeatures = std::array<double, kCostTerms>;

CostFeatures costFeatures(const TuningChoice& choice, const ModelFacts& model, int world);

class CostModel {
 public:
  CostModel();
  double stepSeconds(const CostFeatures& f) const;
  // One measured experiment; refits every weight on all of them.
  void observe(const CostFeatures& f, double measuredStepSeconds);
  size_t observations() const { return seen_.size(); }

 private:
  void refit();
  CostFeatures prior_{}, weights_{};
  std::vector<std::pair<CostFeatures, double>> seen_;
};

}  // namespace ds::launcher
