#include "runtime/optim/optimizer.h"

#include <algorithm>

#include "common/error.h"

namespace ds::runtime {

std::vector<OptimizerStateArray> Optimizer::stateArrays() {
  std::vector<OptimizerStateArray> arrays;
  for (size_t i = 0; i < own_.size(); ++i)
    arrays.push_back({stateNames_[i], state(i), own_[i].size()});
  return arrays;
}

size_t Optimizer::stateBytes() const {
  size_t bytes = 0;
  for (const auto& a : own_) bytes += a.size() * sizeof(float);
  return bytes + feedbackBytes();
}

void Optimizer::setTensorScalars(const std::vector<double>& values) {
  if (!values.empty())
    throw Error(std::string(name()) + " keeps no per-tensor values, got " +
                std::to_string(values.size()));
}

void Optimizer::bindState(const std::vector<float*>& arrays) {
  if (arrays.size() != own_.size())
    throw Error(std::string(name()) + ": bindState got " + std::to_string(arrays.size()) +
                " arrays for " + std::to_string(own_.size()) + " state arrays (a bug)");
  bound_ = arrays;
}

std::vector<OptimizerStateArray> Optimizer::adoptStateArrays() {
  ownWritten_ = true;
  std::vector<OptimizerStateArray> arrays;
  for (size_t i = 0; i < own_.size(); ++i)
    arrays.push_back({stateNames_[i], own_[i].data(), own_[i].size()});
  return arrays;
}

float* Optimizer::own(size_t i) {
  if (!ownWritten_) {
    for (auto& array : own_) std::fill(array.begin(), array.end(), 0.0f);
    ownWritten_ = true;
  }
  return own_[i].data();
}

size_t Optimizer::addState(std::string name, size_t count) {
  stateNames_.push_back(std::move(name));
  own_.emplace_back(count);
  return own_.size() - 1;
}

}  // namespace ds::runtime
