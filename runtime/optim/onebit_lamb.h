// DeepSpeed's 1-bit LAMB (deepspeed/runtime/fp16/onebit/lamb.py; Li et al., 2021) over one
// optimizer range [begin, end) of the flat parameters, whole tensors (ZeRO stage 0).
// - Warm-up (the first freeze_step steps): LAMB on the data group's averaged gradients in
//   DeepSpeed's form (no bias correction, eps outside the square root, weight decay added to the
//   update), each tensor's trust ratio ||p|| / ||update|| clamped to [min_coeff, max_coeff] and
//   folded into a moving average (coeff_beta) that becomes the tensor's frozen coefficient. The
//   variance at freeze_step is copied as the "fresh" variance.
// - Compressed steps: each rank's own gradients (takesLocalGradients) update its momentum, which
//   is scaled per tensor to one common magnitude (the scales fixed at the first compressed step)
//   and averaged by the 1-bit compressed all-reduce. The gradient the averaged momentum implies
//   updates the fresh variance; the frozen variance still divides the update, and the tensor's
//   coefficient is the frozen one times a factor: max(frozen denominator / fresh denominator),
//   mixed towards 1 by the share of weight decay in the update, clamped to [factor_min,
//   factor_max] and to a change of at most factor_threshold from the previous step's.
// The per-tensor values (frozen coefficient, last factor, momentum scale) are the same on every
// rank; checkpoints keep them (tensorScalars). Where we differ from DeepSpeed, and why:
// - The first step updates the parameters (DeepSpeed's first step() only sets up its buffers).
// - A load always restores the per-tensor values (DeepSpeed's resets the frozen coefficients'
//   averages when it loads a warm-up checkpoint, which changes where they end).
// - The common magnitude is the mean over this sub-group's tensors (DeepSpeed's over the
//   optimizer's), the same when the model fits one sub_group_size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "runtime/comm/onebit_allreduce.h"
#include "runtime/config/optimizer_config.h"
#include "runtime/model/model.h"
#include "runtime/optim/optimizer.h"
#include "runtime/optim/shard_segments.h"

namespace ds::runtime {

class OneBitLamb : public Optimizer {
 public:
  OneBitLamb(const OneBitLambParams& params, const std::vector<ParamSpec>& specs, size_t begin,
             size_t end);

  void step(float* params, const float* grads, const OptimizerStep& step) override;
  bool takesLocalGradients() const override { return steps_ >= params_.freezeStep; }
  int64_t steps() const override { return steps_; }
  // The error feedback starts again from zero, as DeepSpeed's load does.
  void setSteps(int64_t steps) override;
  const char* name() const override { return "OneBitLamb"; }
  size_t feedbackBytes() const override;
  // Per tensor: the frozen coefficient, the last factor, the momentum scale (0 until the first
  // compressed step).
  std::vector<double> tensorScalars() const override;
  void setTensorScalars(const std::vector<double>& values) override;
  static constexpr size_t kScalarsPerTensor = 3;

 private:
  struct TensorValues {
    double frozenCoeff = 0.0, lastFactor = 1.0, momentumScale = 0.0;
  };
  void warmUpStep(float* params, const float* grads, float beta1, float beta2, double lr);
  void compressedStep(float* params, const float* grads, const OptimizerStep& step, float beta1,
                      float beta2, double lr);
  // Each tensor's momentum scale, from the momentum as it stands: the mean of the tensors'
  // ||m|| / sqrt(n) over this tensor's.
  void fixMomentumScales();

  OneBitLambParams params_;
  std::vector<ShardSegment> segments_;  // one per tensor
  std::vector<TensorValues> tensors_;
  size_t count_;
  int64_t steps_ = 0;
  std::vector<float> lastMomentum_;  // the compressed step's momentum before its update
  OneBitErrors errors_;              // sized at the first compressed step, for its group
};

}  // namespace ds::runtime
