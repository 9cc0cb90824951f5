// LayerAccess over one flat fp32 parameter buffer held whole in an accelerator's device memory,
// with whole-model fp32 gradients there too: FlatParameters for a model built on a device (the
// PyTorch comparisons on a GPU, the device tests), without an Engine.
#pragma once

#include <algorithm>
#include <vector>

#include "kernels/device_array.h"
#include "runtime/model/model.h"

namespace ds::runtime {

class DeviceParameters : public LayerAccess {
 public:
  // Copies the model's parameters (`params`, host memory, parameterCount() of them) to `acc`.
  DeviceParameters(const Model& model, const float* params, kernels::Accelerator& acc) : acc_(acc) {
    const auto& specs = model.parameters();
    first_.assign(model.layerCount() + 1, model.parameterCount());
    for (auto it = specs.rbegin(); it != specs.rend(); ++it) first_[it->layer] = it->offset;
    for (int l = model.layerCount() - 1; l >= 0; --l)  // layers without parameters
      first_[l] = std::min(first_[l], first_[l + 1]);
    kernels::assignHost(acc, params_, std::vector<float>(params, params + model.parameterCount()));
    grads_.resize(acc, model.parameterCount());
  }

  const float* acquireParameters(int layer) override { return params_.data() + first_.at(layer); }
  void releaseParameters(int) override {}
  // Gradients accumulate over calls (zeroGradients() clears them), as across micro-batches.
  float* layerGradients(int layer) override { return grads_.data() + first_.at(layer); }
  void gradientsDone(int) override {}

  // The flat buffers in device memory, for an optimizer that steps them whole.
  float* parameterData() { return params_.data(); }
  float* gradientData() { return grads_.data(); }
  size_t size() const { return params_.size(); }

  // The gradients so far, copied to the host.
  std::vector<float> gradients() const {
    return kernels::copyToHost(acc_, grads_.data(), grads_.size());
  }
  void zeroGradients() {
    acc_.fillZero(grads_.data(), grads_.size() * sizeof(float), acc_.currentStream());
  }

 private:
  kernels::Accelerator& acc_;
  kernels::DeviceArray<float> params_, grads_;
  std::vector<size_t> first_;  // per layer: its first element; [layers] = the total
};

}  // namespace ds::runtime
