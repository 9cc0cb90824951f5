// LayerAccess over one flat fp32 parameter buffer held whole (no ZeRO), with whole-model fp32
// gradients: what generation, the PyTorch comparison tests and the single-process benchmarks use
// to run a Model without an Engine.
#pragma once

#include <algorithm>
#include <vector>

#include "runtime/model/model.h"

namespace ds::runtime {

class FlatParameters : public LayerAccess {
 public:
  // `params` stays owned by the caller and must outlive this object.
  FlatParameters(const Model& model, const float* params) : params_(params) {
    const auto& specs = model.parameters();
    first_.assign(model.layerCount() + 1, model.parameterCount());
    for (auto it = specs.rbegin(); it != specs.rend(); ++it) first_[it->layer] = it->offset;
    for (int l = model.layerCount() - 1; l >= 0; --l)  // layers without parameters
      first_[l] = std::min(first_[l], first_[l + 1]);
    grads_.assign(model.parameterCount(), 0.0f);
  }

  const float* acquireParameters(int layer) override { return params_ + first_.at(layer); }
  void releaseParameters(int) override {}
  // Gradients accumulate over calls (zeroGradients() clears them), as across micro-batches.
  float* layerGradients(int layer) override { return grads_.data() + first_.at(layer); }
  void gradientsDone(int) override {}

  const std::vector<float>& gradients() const { return grads_; }
  void zeroGradients() { std::fill(grads_.begin(), grads_.end(), 0.0f); }

 private:
  const float* params_;
  std::vector<size_t> first_;  // per layer: its first element; [layers] = the total
  std::vector<float> grads_;
};

}  // namespace ds::runtime
