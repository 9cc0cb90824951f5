// Optimizer: one rank's update over its shard [begin, end) of the flat fp32 master weights (the
// whole buffer at ZeRO 0, this rank's partition at 1-3). State is element-wise over the same
// shard, so checkpoints can save and re-slice it. Implementations: adam.h, lamb.h, sgd.h and the
// 1-bit ones (onebit_adam.h, zero_one_adam.h, onebit_lamb.h); built
// from the config by makeOptimizer (make_optimizer.h). Gradient clipping and loss scaling are the
// engine's: step() receives final, unscaled fp32 gradients.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/aligned_vector.h"
#include "kernels/cpu/cpu_adam.h"

namespace ds::runtime {

class Communicator;

struct OptimizerStep {
  double lr = 0;
  std::optional<double> momentum;  // OneCycle's cycled momentum: beta1 (Adam/Lamb) or SGD momentum
  std::optional<double> beta2;     // OneCycle's betas[1] while it cycles momentum (Adam/Lamb)
  // Lamb only: sums `count` doubles element-wise across the data-parallel group (the engine passes
  // an all_reduce); empty = the optimizer sees whole tensors (unsharded). Every rank calls it once
  // per step with the same count, so it may be a collective.
  std::function<void(double* values, size_t count)> sumAcrossShards;
  // 1-bit optimizers past their freeze: the data group over which they average their compressed
  // momentum (every rank of it steps together).
  Communicator* dataGroup = nullptr;
  // Honoured when fusesHalfCopy(): the updated parameters are also written here, rounded to
  // bf16/fp16, in the same pass (element i of the shard at halfCopy.out[i]).
  kernels::HalfCopy halfCopy;
};

// One element-wise state array, aligned with the shard: data[i] belongs to element begin + i.
struct OptimizerStateArray {
  std::string name;  // PyTorch's state key: "exp_avg", "exp_avg_sq", "momentum_buffer"
  float* data;
  size_t count;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // params and grads point at element `begin` of the flat buffers; params are updated in place.
  virtual void step(float* params, const float* grads, const OptimizerStep& step) = 0;
  // The element-wise state, in a fixed order: the optimizer's own arrays, or where bindState put
  // them. Checkpoints: write into the arrays of a fresh optimizer, then setSteps(saved steps()),
  // and the next step equals the one the saved optimizer would have taken (bitwise).
  std::vector<OptimizerStateArray> stateArrays();
  // The element-wise arrays', plus what an optimizer keeps beside them (feedbackBytes).
  size_t stateBytes() const;
  // State that is not element-wise (a 1-bit optimizer's error feedback), never checkpointed.
  virtual size_t feedbackBytes() const { return 0; }
  // Values kept per tensor of the range beside the element-wise state (1-bit LAMB's frozen
  // coefficients), the same on every rank that holds the tensor: checkpoints save them in tensor
  // order and give a fresh optimizer back the same number (tensorScalars().size()).
  virtual std::vector<double> tensorScalars() const { return {}; }
  virtual void setTensorScalars(const std::vector<double>& values);
  // For a home that keeps the state elsewhere (offload_optimizer nvme, whose zeros are written
  // straight into its swap slots): the own arrays, as stateArrays() would give them, but left
  // untouched (no page written) and never zeroed from now on: the caller fills them (a swap-in)
  // before anything reads them. Otherwise the own arrays are zeroed when first used.
  std::vector<OptimizerStateArray> adoptStateArrays();
  // Whether the state is still the fresh zeros, never written: a home may then write its zeros
  // somewhere else without reading the arrays.
  bool stateIsFresh() const { return !ownWritten_ && bound_.empty(); }
  // offload_optimizer nvme: until unbindState(), the state is at `arrays` (stateArrays() order,
  // same sizes): a resident slot the swapper read it into. The own arrays are then left alone (the
  // swapper gives their pages back and uses them around checkpoints only).
  void bindState(const std::vector<float*>& arrays);
  void unbindState() { bound_.clear(); }
  virtual int64_t steps() const = 0;
  virtual void setSteps(int64_t steps) = 0;
  // "Adam" (also AdamW: same state), "Lamb", "SGD": checkpoints refuse to load across names.
  virtual const char* name() const = 0;
  // Whether step() writes OptimizerStep::halfCopy (otherwise the caller converts afterwards).
  virtual bool fusesHalfCopy() const { return false; }
  // Whether the next step() takes this rank's own gradients, not the data group's average (a
  // 1-bit optimizer past its freeze, which exchanges its momentum itself).
  virtual bool takesLocalGradients() const { return false; }

 protected:
  // A zeroed state array of `count` elements (PyTorch's state key `name`); returns its index.
  size_t addState(std::string name, size_t count);
  float* state(size_t i) { return bound_.empty() ? own(i) : bound_[i]; }

 private:
  float* own(size_t i);
  std::vector<std::string> stateNames_;
  // Allocated untouched (AlignedVector): a large shard's state costs no page until written.
  std::vector<AlignedVector<float>> own_;
  bool ownWritten_ = false;  // zeroed, or adopted by a home that fills them
  std::vector<float*> bound_;
};

}  // namespace ds::runtime
