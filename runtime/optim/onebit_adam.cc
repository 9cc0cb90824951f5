#include "runtime/optim/onebit_adam.h"

#include <cmath>

#include "common/error.h"

namespace ds::runtime {

OneBitAdam::OneBitAdam(const OneBitAdamParams& params, const std::vector<ParamSpec>& specs,
                       size_t begin, size_t end)
    : params_(params), runs_(mergeByDecay(shardSegments(specs, begin, end))), count_(end - begin) {
  addState("exp_avg", count_);
  addState("exp_avg_sq", count_);
}

void OneBitAdam::setSteps(int64_t steps) {
  steps_ = steps;
  errors_ = {};
}

void OneBitAdam::step(float* params, const float* grads, const OptimizerStep& step) {
  const bool compressed = takesLocalGradients();
  ++steps_;
  const auto beta1 = static_cast<float>(step.momentum.value_or(params_.beta1));
  const auto beta2 = static_cast<float>(step.beta2.value_or(params_.beta2));
  float* m = state(0);
  float* v = state(1);
  for (size_t i = 0; i < count_; ++i) m[i] = beta1 * m[i] + (1.0f - beta1) * grads[i];
  if (!compressed) {
    for (size_t i = 0; i < count_; ++i) v[i] = beta2 * v[i] + (1.0f - beta2) * grads[i] * grads[i];
  } else if (step.dataGroup && step.dataGroup->size() > 1) {
    Communicator& group = *step.dataGroup;
    if (errors_.worker.size() != oneBitPaddedCount(count_, group.size()))
      errors_.reset(count_, group.size());
    oneBitAllReduce(group, m, count_, errors_);
  }
  const auto lr = static_cast<float>(step.lr), eps = static_cast<float>(params_.eps);
  for (const ShardSegment& run : runs_) {
    const auto wd = static_cast<float>(run.decay ? params_.weightDecay : 0.0);
    for (size_t i = run.begin; i < run.end; ++i) {
      const float update = m[i] / (std::sqrt(v[i]) + eps) + wd * params[i];
      params[i] -= lr * update;
    }
  }
}

}  // namespace ds::runtime
