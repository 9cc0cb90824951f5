// Adam: bias corrections and per-group weight decay here; the element loop is kernels::adamUpdate.
// adamWMode (DeepSpeed's default) means decoupled weight decay; otherwise classic L2.
#include "runtime/optim/adam.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/adam_kernel.h"

namespace ds::runtime {

Adam::Adam(const AdamParams& params, const std::vector<ParamSpec>& specs, size_t begin, size_t end)
    : params_(params), m_(end - begin, 0.0f), v_(end - begin, 0.0f) {
  for (const auto& spec : specs) {
    const size_t lo = std::max(begin, spec.offset), hi = std::min(end, spec.offset + spec.numel);
    if (lo < hi) segments_.push_back({lo - begin, hi - begin, spec.weightDecay});
  }
}

void Adam::step(float* params, const float* grads, double lr) {
  ++steps_;
  const double biasCorrection1 = 1.0 - std::pow(params_.beta1, static_cast<double>(steps_));
  const double biasCorrection2 = 1.0 - std::pow(params_.beta2, static_cast<double>(steps_));
  kernels::AdamStepConstants c{};
  c.beta1 = static_cast<float>(params_.beta1);
  c.beta2 = static_cast<float>(params_.beta2);
  c.oneMinusBeta1 = static_cast<float>(1.0 - params_.beta1);
  c.oneMinusBeta2 = static_cast<float>(1.0 - params_.beta2);
  c.eps = static_cast<float>(params_.eps);
  c.stepSize = static_cast<float>(lr / biasCorrection1);
  c.invSqrtBc2 = static_cast<float>(1.0 / std::sqrt(biasCorrection2));
  c.decoupledDecay = params_.adamWMode;
  for (const auto& seg : segments_) {
    c.weightDecay = seg.decay ? static_cast<float>(params_.weightDecay) : 0.0f;
    c.decayFactor = static_cast<float>(1.0 - lr * c.weightDecay);
    kernels::adamUpdate(params + seg.begin, grads + seg.begin, m_.data() + seg.begin,
                        v_.data() + seg.begin, seg.end - seg.begin, c);
  }
}

}  // namespace ds::runtime
