// A small tanh MLP and the deterministic synthetic task it learns (regressing a fixed random
// "teacher" MLP). The first built-in model: enough to prove data-parallel training end to end.
// Samples are a pure function of (seed, global sample index), so any split of a global batch
// across ranks sees exactly the same data.
#pragma once

#include <vector>

#include "runtime/model/model.h"

namespace ds::runtime {

class Mlp : public Model {
 public:
  // layerSizes = {in, hidden..., out}; at least two entries.
  explicit Mlp(std::vector<int> layerSizes);

  const std::vector<ParamSpec>& parameters() const override { return specs_; }
  int layerCount() const override { return static_cast<int>(sizes_.size()) - 1; }
  std::string architecture() const override;
  void initTensorRange(const ParamSpec& spec, float* values, uint64_t seed, size_t begin,
                       size_t end) const override;
  float forwardBackward(const Batch& batch, LayerAccess& access, float gradScale) override;

  // Forward pass only over the flat parameters; returns the outputs (batch x outputDim), valid
  // until the next call.
  const std::vector<float>& forward(const float* params, const std::vector<float>& inputs,
                                    size_t count);

  int inputDim() const { return sizes_.front(); }
  int outputDim() const { return sizes_.back(); }

 private:
  std::vector<int> sizes_;
  // Layer l: y = x W^T + b (tanh unless last); w and b point at the layer's weight and bias.
  void layerForward(size_t l, const float* w, const float* b, size_t n);

  std::vector<ParamSpec> specs_;                 // W0, b0, W1, b1, ...
  std::vector<std::vector<float>> activations_;  // per layer, reused across calls
  std::vector<std::vector<float>> deltas_;
};

// The synthetic task: inputs uniform in [-1, 1), targets from a teacher MLP fixed by taskSeed.
class TeacherTask {
 public:
  TeacherTask(int inputDim, int outputDim, uint64_t taskSeed);
  // Fills samples [firstIndex, firstIndex + count) of the infinite deterministic stream.
  Batch batch(uint64_t firstIndex, size_t count) const;

 private:
  int inputDim_;
  int outputDim_;
  uint64_t seed_;
  Mlp teacher_;
  std::vector<float> teacherParams_;
};

}  // namespace ds::runtime
