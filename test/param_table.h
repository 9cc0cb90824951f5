// A parameter table for optimizer and partitioning tests: tensors of the given sizes laid out
// back to back, each with its weight-decay flag, two tensors per layer; and the step they are
// stepped with.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/model/model.h"
#include "runtime/optim/optimizer.h"

namespace ds::test {

inline std::vector<runtime::ParamSpec> makeSpecs(
    const std::vector<std::pair<size_t, bool>>& tensors) {
  std::vector<runtime::ParamSpec> specs;
  size_t offset = 0;
  for (size_t t = 0; t < tensors.size(); ++t) {
    const auto [numel, decay] = tensors[t];
    runtime::ParamSpec spec;
    spec.name = "t" + std::to_string(t);
    spec.shape = {static_cast<int64_t>(numel)};
    spec.weightDecay = decay;
    spec.offset = offset;
    spec.numel = numel;
    spec.layer = static_cast<int>(t / 2);
    specs.push_back(std::move(spec));
    offset += numel;
  }
  return specs;
}

// OptimizerStep with only lr (and the momentum override) set.
inline runtime::OptimizerStep stepAt(double lr, std::optional<double> momentum = std::nullopt) {
  runtime::OptimizerStep s;
  s.lr = lr;
  s.momentum = momentum;
  return s;
}

}  // namespace ds::test
