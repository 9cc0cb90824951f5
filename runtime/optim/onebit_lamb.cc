#include "runtime/optim/onebit_lamb.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"

namespace ds::runtime {
namespace {

double squareSum(const float* x, size_t n) {
  double sum = 0.0;
  for (size_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  return sum;
}

}  // namespace

OneBitLamb::OneBitLamb(const OneBitLambParams& params, const std::vector<ParamSpec>& specs,
                       size_t begin, size_t end)
    : params_(params),
      segments_(shardSegments(specs, begin, end)),
      tensors_(specs.size()),
      count_(end - begin) {
  addState("exp_avg", count_);
  addState("exp_avg_sq", count_);
  addState("exp_avg_sq_fresh", count_);
}

size_t OneBitLamb::feedbackBytes() const {
  return (lastMomentum_.capacity() + errors_.worker.capacity() + errors_.server.capacity()) *
         sizeof(float);
}

void OneBitLamb::setSteps(int64_t steps) {
  steps_ = steps;
  errors_ = {};
}

std::vector<double> OneBitLamb::tensorScalars() const {
  std::vector<double> out;
  for (const TensorValues& t : tensors_)
    out.insert(out.end(), {t.frozenCoeff, t.lastFactor, t.momentumScale});
  return out;
}

void OneBitLamb::setTensorScalars(const std::vector<double>& values) {
  if (values.size() != kScalarsPerTensor * tensors_.size())
    throw Error("OneBitLamb: " + std::to_string(values.size()) + " per-tensor values for " +
                std::to_string(tensors_.size()) + " tensors (want " +
                std::to_string(kScalarsPerTensor) + " each)");
  for (size_t t = 0; t < tensors_.size(); ++t)
    tensors_[t] = {values[3 * t], values[3 * t + 1], values[3 * t + 2]};
}

void OneBitLamb::step(float* params, const float* grads, const OptimizerStep& step) {
  const bool compressed = takesLocalGradients();
  ++steps_;
  const auto beta1 = static_cast<float>(step.momentum.value_or(params_.beta1));
  const auto beta2 = static_cast<float>(step.beta2.value_or(params_.beta2));
  const double lr = step.lr;
  if (compressed)
    compressedStep(params, grads, step, beta1, beta2, lr);
  else
    warmUpStep(params, grads, beta1, beta2, lr);
}

void OneBitLamb::warmUpStep(float* params, const float* grads, float beta1, float beta2,
                            double lr) {
  float* m = state(0);
  float* v = state(1);
  const auto eps = static_cast<float>(params_.eps);
  for (size_t i = 0; i < count_; ++i) {
    m[i] = beta1 * m[i] + (1.0f - beta1) * grads[i];
    v[i] = beta2 * v[i] + (1.0f - beta2) * grads[i] * grads[i];
  }
  if (steps_ == params_.freezeStep) std::copy(v, v + count_, state(2));
  for (const ShardSegment& seg : segments_) {
    const auto wd = static_cast<float>(seg.decay ? params_.weightDecay : 0.0);
    double weights = 0.0, updates = 0.0;
    for (size_t i = seg.begin; i < seg.end; ++i) {
      const float u = m[i] / (std::sqrt(v[i]) + eps) + wd * params[i];
      weights += static_cast<double>(params[i]) * params[i];
      updates += static_cast<double>(u) * u;
    }
    double coeff = 1.0;
    if (weights != 0.0 && updates != 0.0)
      coeff = std::max(std::min(std::sqrt(weights / updates), params_.maxCoeff), params_.minCoeff);
    TensorValues& t = tensors_[seg.tensor];
    if (coeff != 1.0)
      t.frozenCoeff = params_.coeffBeta * t.frozenCoeff + (1.0 - params_.coeffBeta) * coeff;
    const auto scale = static_cast<float>(lr * coeff);
    for (size_t i = seg.begin; i < seg.end; ++i)
      params[i] -= scale * (m[i] / (std::sqrt(v[i]) + eps) + wd * params[i]);
  }
}

void OneBitLamb::fixMomentumScales() {
  const float* m = state(0);
  double sum = 0.0;
  std::vector<double> scales;
  for (const ShardSegment& seg : segments_) {
    const size_t n = seg.end - seg.begin;
    scales.push_back(n ? std::sqrt(squareSum(m + seg.begin, n) / static_cast<double>(n)) : 0.0);
    sum += scales.back();
  }
  const double united = segments_.empty() ? 0.0 : sum / static_cast<double>(segments_.size());
  // A tensor whose momentum is all zeros keeps its scale (DeepSpeed's divides by zero there).
  for (size_t s = 0; s < segments_.size(); ++s)
    tensors_[segments_[s].tensor].momentumScale = scales[s] > 0.0 ? united / scales[s] : 1.0;
}

void OneBitLamb::compressedStep(float* params, const float* grads, const OptimizerStep& step,
                                float beta1, float beta2, double lr) {
  float* m = state(0);
  const float* v = state(1);
  float* fresh = state(2);
  const auto eps = static_cast<float>(params_.eps);
  if (tensors_.empty() || tensors_[segments_.front().tensor].momentumScale == 0.0)
    fixMomentumScales();
  lastMomentum_.assign(m, m + count_);
  for (const ShardSegment& seg : segments_) {
    const auto scale = static_cast<float>(tensors_[seg.tensor].momentumScale);
    for (size_t i = seg.begin; i < seg.end; ++i)
      m[i] = (beta1 * m[i] + (1.0f - beta1) * grads[i]) * scale;
  }
  if (step.dataGroup && step.dataGroup->size() > 1) {
    Communicator& group = *step.dataGroup;
    if (errors_.worker.size() != oneBitPaddedCount(count_, group.size()))
      errors_.reset(count_, group.size());
    oneBitAllReduce(group, m, count_, errors_);
  }
  for (const ShardSegment& seg : segments_) {
    TensorValues& t = tensors_[seg.tensor];
    const auto scale = static_cast<float>(t.momentumScale);
    const auto wd = static_cast<float>(seg.decay ? params_.weightDecay : 0.0);
    double factor = 0.0, plain = 0.0, decayed = 0.0;
    for (size_t i = seg.begin; i < seg.end; ++i) {
      m[i] /= scale;
      const float g = (m[i] - lastMomentum_[i] * beta1) / (1.0f - beta1);
      fresh[i] = beta2 * fresh[i] + (1.0f - beta2) * g * g;
      const float denom = std::sqrt(v[i]) + eps;
      const float prelim = m[i] / denom, update = prelim + wd * params[i];
      factor = std::max(factor, static_cast<double>(denom / (std::sqrt(fresh[i]) + eps)));
      plain += static_cast<double>(prelim) * prelim;
      decayed += static_cast<double>(update) * update;
    }
    if (wd > 0.0f && decayed > 0.0) {
      const double share = std::min(1.0, std::sqrt(plain / decayed));
      factor = factor * share + (1.0 - share);
    }
    factor = std::clamp(factor, params_.factorMin, params_.factorMax);
    factor = std::clamp(factor, t.lastFactor * (1.0 - params_.factorThreshold),
                        t.lastFactor * (1.0 + params_.factorThreshold));
    t.lastFactor = factor;
    const auto stepScale = static_cast<float>(lr * t.frozenCoeff * factor);
    for (size_t i = seg.begin; i < seg.end; ++i)
      params[i] -= stepScale * (m[i] / (std::sqrt(v[i]) + eps) + wd * params[i]);
  }
}

}  // namespace ds::runtime
