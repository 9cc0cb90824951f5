// Adam: bias corrections and per-group weight decay here; the element loop is the accelerator's
// adamStep (on the CPU backend CPU-Adam: SIMD picked at run time, threads, bitwise equal to
// kernels::adamUpdate).
// adamWMode (DeepSpeed's default) means decoupled weight decay; otherwise classic L2.
#include "runtime/optim/adam.h"

#include <cmath>

namespace ds::runtime {

Adam::Adam(const AdamParams& params, const std::vector<ParamSpec>& specs, size_t begin, size_t end,
           kernels::Accelerator& acc)
    : params_(params), acc_(&acc), runs_(mergeByDecay(shardSegments(specs, begin, end))) {
  addState("exp_avg", end - begin);
  addState("exp_avg_sq", end - begin);
}

void Adam::step(float* params, const float* grads, const OptimizerStep& step) {
  ++steps_;
  const double lr = step.lr;
  const double beta1 = step.momentum.value_or(params_.beta1);
  const double beta2 = step.beta2.value_or(params_.beta2);
  kernels::AdamStepConstants c = kernels::adamStepConstants(
      lr, beta1, beta2, params_.eps, 0.0, params_.adamWMode, steps_, params_.biasCorrection);
  float* m = state(0);
  float* v = state(1);
  for (const ShardSegment& run : runs_) {
    const double wd = run.decay ? params_.weightDecay : 0.0;
    c.weightDecay = static_cast<float>(wd);
    c.decayFactor = static_cast<float>(1.0 - lr * wd);
    kernels::HalfCopy copy = step.halfCopy;
    if (copy.out != nullptr) copy.out += run.begin;
    acc_->adamStep(params + run.begin, grads + run.begin, m + run.begin, v + run.begin,
                   run.end - run.begin, c, copy, acc_->currentStream());
  }
}

}  // namespace ds::runtime
