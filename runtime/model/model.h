// Model: what the engine needs from a model. Parameters are described by a table (name, shape,
// weight decay) and live in one flat fp32 buffer the engine owns; the model only reads them and
// accumulates gradients into the matching flat gradient buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ds::runtime {

struct ParamSpec {
  std::string name;
  std::vector<int64_t> shape;
  bool weightDecay = true;  // biases and norms are conventionally excluded
  size_t offset = 0;        // element offset in the flat buffer
  size_t numel = 0;
};

// A micro-batch: `size` samples of inputDim floats and targetDim floats, row-major.
struct Batch {
  size_t size = 0;
  std::vector<float> inputs;
  std::vector<float> targets;
};

class Model {
 public:
  virtual ~Model() = default;

  virtual const std::vector<ParamSpec>& parameters() const = 0;
  size_t parameterCount() const {
    const auto& specs = parameters();
    return specs.empty() ? 0 : specs.back().offset + specs.back().numel;
  }
  // Writes the initial values, identical on every rank for the same seed.
  virtual void initParameters(float* params, uint64_t seed) const = 0;
  // Mean loss over the batch; adds d(loss * gradScale)/d(params) into grads.
  virtual float forwardBackward(const float* params, float* grads, const Batch& batch,
                                float gradScale) = 0;
};

}  // namespace ds::runtime
