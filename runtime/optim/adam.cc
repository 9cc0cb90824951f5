// Adam with PyTorch's update order. adamWMode (DeepSpeed's default): decoupled weight decay,
// p *= 1 - lr * wd before the moment update. Otherwise classic L2: g += wd * p.
#include "runtime/optim/adam.h"

#include <algorithm>
#include <cmath>

namespace ds::runtime {

Adam::Adam(const AdamParams& params, const std::vector<ParamSpec>& specs, size_t begin,
           size_t end)
    : params_(params), m_(end - begin, 0.0f), v_(end - begin, 0.0f) {
  for (const auto& spec : specs) {
    const size_t lo = std::max(begin, spec.offset), hi = std::min(end, spec.offset + spec.numel);
    if (lo < hi) segments_.push_back({lo - begin, hi - begin, spec.weightDecay});
  }
}

void Adam::step(float* params, const float* grads, double lr) {
  ++steps_;
  const double beta1 = params_.beta1, beta2 = params_.beta2;
  const double biasCorrection1 = 1.0 - std::pow(beta1, static_cast<double>(steps_));
  const double biasCorrection2 = 1.0 - std::pow(beta2, static_cast<double>(steps_));
  const float stepSize = static_cast<float>(lr / biasCorrection1);
  const float invSqrtBc2 = static_cast<float>(1.0 / std::sqrt(biasCorrection2));
  const float b1 = static_cast<float>(beta1), b2 = static_cast<float>(beta2);
  const float eps = static_cast<float>(params_.eps);
  for (const auto& seg : segments_) {
    const float wd = seg.decay ? static_cast<float>(params_.weightDecay) : 0.0f;
    const float decayFactor = static_cast<float>(1.0 - lr * wd);
    for (size_t i = seg.begin; i < seg.end; ++i) {
      float g = grads[i];
      if (params_.adamWMode) {
        params[i] *= decayFactor;
      } else {
        g += wd * params[i];
      }
      m_[i] = b1 * m_[i] + (1.0f - b1) * g;
      v_[i] = b2 * v_[i] + (1.0f - b2) * g * g;
      const float denom = std::sqrt(v_[i]) * invSqrtBc2 + eps;
      params[i] -= stepSize * m_[i] / denom;
    }
  }
}

}  // namespace ds::runtime
