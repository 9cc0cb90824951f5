#include "runtime/engine/device_layer_bridge.h"

namespace ds::runtime {

DeviceLayerBridge::DeviceLayerBridge(const Model& model, LayerAccess& host,
                                     kernels::Accelerator& acc)
    : host_(host), acc_(acc) {
  const size_t layers = static_cast<size_t>(model.layerCount());
  numel_.assign(layers, 0);
  for (const ParamSpec& spec : model.parameters()) numel_.at(spec.layer) += spec.numel;
  params_.resize(layers);
  grads_.resize(layers);
  hostGrads_.assign(layers, nullptr);
}

const float* DeviceLayerBridge::acquireParameters(int layer) {
  const float* values = host_.acquireParameters(layer);
  const size_t n = numel_.at(layer);
  float* device = params_[layer].resize(acc_, n);
  acc_.copy(device, values, n * sizeof(float), kernels::CopyKind::HostToDevice,
            acc_.currentStream());
  return device;
}

void DeviceLayerBridge::releaseParameters(int layer) {
  // The copy above read the host values: they may go once it is done.
  acc_.synchronize(acc_.currentStream());
  host_.releaseParameters(layer);
}

float* DeviceLayerBridge::layerGradients(int layer) {
  hostGrads_.at(layer) = host_.layerGradients(layer);  // in the model's order of calls
  const size_t n = numel_.at(layer);
  float* device = grads_.at(layer).resize(acc_, n);
  acc_.fillZero(device, n * sizeof(float), acc_.currentStream());
  return device;
}

void DeviceLayerBridge::gradientsDone(int layer) {
  const size_t n = numel_.at(layer);
  acc_.copy(hostGrads_.at(layer), grads_.at(layer).data(), n * sizeof(float),
            kernels::CopyKind::DeviceToHost, acc_.currentStream());
  acc_.synchronize(acc_.currentStream());
  host_.gradientsDone(layer);
}

}  // namespace ds::runtime
