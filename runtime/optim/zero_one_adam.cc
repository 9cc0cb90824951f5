#include "runtime/optim/zero_one_adam.h"

#include <algorithm>
#include <cmath>

namespace ds::runtime {

ZeroOneAdam::ZeroOneAdam(const ZeroOneAdamParams& params, const std::vector<ParamSpec>& specs,
                         size_t begin, size_t end)
    : params_(params), segments_(shardSegments(specs, begin, end)), count_(end - begin) {
  addState("exp_avg", count_);
  addState("exp_avg_sq", count_);
}

bool ZeroOneAdam::takesLocalGradients() const {
  return frozen() || (steps_ + 1) % schedule_.varInterval != 0;
}

size_t ZeroOneAdam::feedbackBytes() const {
  size_t floats = accumulator_.capacity();
  for (const OneBitErrors& e : errors_) floats += e.worker.capacity() + e.server.capacity();
  return floats * sizeof(float);
}

void ZeroOneAdam::setSteps(int64_t steps) {
  schedule_ = {};
  for (steps_ = 0; steps_ < steps;) advanceSchedule(++steps_);
  accumulator_.assign(accumulator_.size(), 0.0f);
  lrSum_ = 0;
  errors_ = {};
}

void ZeroOneAdam::advanceSchedule(int64_t t) {
  Schedule& s = schedule_;
  if (t <= params_.varFreezeStep) {
    if (t % s.varInterval == 0 && ++s.varCounter == params_.varUpdateScaler) {
      s.varCounter = 0;
      s.varInterval *= 2;
    }
  } else if (++s.localCounter == params_.localStepScaler) {
    s.localCounter = 0;
    s.localInterval = std::min(params_.localStepClipper, 2 * s.localInterval);
  }
}

void ZeroOneAdam::boundByVariance(float* x, const float* v, float factor) const {
  const auto eps = static_cast<float>(params_.eps);
  for (size_t i = 0; i < count_; ++i) {
    const float bound = factor * (std::sqrt(v[i]) + eps);
    x[i] = std::clamp(x[i], -bound, bound);
  }
}

bool ZeroOneAdam::compressedAverage(float* data, const OptimizerStep& step) {
  if (!step.dataGroup || step.dataGroup->size() == 1) return false;
  Communicator& group = *step.dataGroup;
  if (errors_.size() != segments_.size()) errors_.resize(segments_.size());
  for (size_t s = 0; s < segments_.size(); ++s) {
    const size_t n = segments_[s].end - segments_[s].begin;
    if (errors_[s].worker.size() != oneBitPaddedCount(n, group.size()))
      errors_[s].reset(n, group.size());
    oneBitAllReduce(group, data + segments_[s].begin, n, errors_[s]);
  }
  return true;
}

void ZeroOneAdam::step(float* params, const float* grads, const OptimizerStep& step) {
  const bool local = frozen();
  const bool varianceStep = !local && !takesLocalGradients();
  const int64_t t = ++steps_;
  const auto beta1 = static_cast<float>(step.momentum.value_or(params_.beta1));
  const auto beta2 = static_cast<float>(step.beta2.value_or(params_.beta2));
  const auto lr = static_cast<float>(step.lr), eps = static_cast<float>(params_.eps);
  float* m = state(0);
  float* v = state(1);
  accumulator_.resize(count_, 0.0f);
  float* u = accumulator_.data();

  const float* g = grads;
  if (varianceStep) {
    for (size_t i = 0; i < count_; ++i) v[i] = beta2 * v[i] + (1.0f - beta2) * grads[i] * grads[i];
  } else if (!local) {
    std::copy(grads, grads + count_, u);
    if (compressedAverage(u, step)) boundByVariance(u, v, 1.0f);
    g = u;
  }
  for (size_t i = 0; i < count_; ++i) m[i] = beta1 * m[i] + (1.0f - beta1) * g[i];
  if (local) lrSum_ += step.lr;

  for (const ShardSegment& run : segments_) {
    const auto wd = static_cast<float>(run.decay ? params_.weightDecay : 0.0);
    for (size_t i = run.begin; i < run.end; ++i) {
      const float delta = -lr * (m[i] / (std::sqrt(v[i]) + eps) + wd * params[i]);
      params[i] += delta;
      if (local) u[i] += delta;
    }
  }
  if (local && t % schedule_.localInterval == 0) {
    // Back to the parameters of the last exchange, then forward by the group's average of the
    // local updates (exchanged in the momentum's units, where one scale suits every element).
    for (size_t i = 0; i < count_; ++i) {
      params[i] -= u[i];
      u[i] *= std::sqrt(v[i]) + eps;
    }
    compressedAverage(u, step);
    // The momentum is the averaged updates per unit of learning rate, less their weight decay
    // (taken at the last exchange's parameters, where they started): DeepSpeed's keeps the decay
    // in it, so each exchange feeds the decay back into the momentum, which compounds it about
    // 1 / (1 - beta1)-fold. With a zero learning rate since the exchange there were no updates to
    // learn a momentum from (DeepSpeed's divides by zero there).
    const float perLr = lrSum_ > 0 ? static_cast<float>(1.0 / lrSum_) : 0.0f;
    for (const ShardSegment& run : segments_) {
      const auto wd = static_cast<float>(run.decay ? params_.weightDecay : 0.0);
      for (size_t i = run.begin; i < run.end; ++i) {
        const float denom = std::sqrt(v[i]) + eps;
        if (lrSum_ > 0) m[i] = -u[i] * perLr - wd * params[i] * denom;
        params[i] += u[i] / denom;
      }
    }
    std::fill(u, u + count_, 0.0f);
    lrSum_ = 0;
  }
  advanceSchedule(t);
  // The errors fed back so far were the gradients'; from here they are the local updates'.
  if (!local && frozen()) {
    errors_ = {};
    std::fill(u, u + count_, 0.0f);
  }
}

}  // namespace ds::runtime
