// The engine's layer access for a model computing on a device whose memory host code cannot
// touch (a GPU): the engine keeps its states where it always does (host memory, every ZeRO stage,
// offload and checkpoint as on the CPU), and each layer crosses to the device when the model asks
// for it. acquireParameters copies the layer's parameters (the engine's fp32 view, gathered at
// stage 3) into the layer's device buffer; layerGradients takes the engine's zeroed scratch and
// hands out a zeroed device buffer for the backward to add into; gradientsDone copies that into the
// scratch, which is what
// the model would have added there, and hands the layer on. So the engine's arithmetic, and every
// result, is the CPU's: only the model's passes run on the device. DeepSpeed's ZeRO-Offload
// splits a step the same way, with the optimizer on the CPU.
#pragma once

#include <vector>

#include "kernels/accelerator.h"
#include "kernels/device_array.h"
#include "runtime/model/model.h"

namespace ds::runtime {

class DeviceLayerBridge : public LayerAccess {
 public:
  // `host` (the engine) and `acc` must outlive the bridge; the model's table sizes the layers.
  DeviceLayerBridge(const Model& model, LayerAccess& host, kernels::Accelerator& acc);

  const float* acquireParameters(int layer) override;
  void releaseParameters(int layer) override;
  float* layerGradients(int layer) override;
  void gradientsDone(int layer) override;

 private:
  LayerAccess& host_;
  kernels::Accelerator& acc_;
  std::vector<size_t> numel_;                                // per layer
  std::vector<kernels::DeviceArray<float>> params_, grads_;  // per layer, allocated on first use
  std::vector<float*> hostGrads_;  // per layer: the engine's scratch, while its backward runs
};

}  // namespace ds::runtime
