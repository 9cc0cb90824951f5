// adamUpdate: PyTorch's operation order, so results match torch.optim.Adam/AdamW within rounding.
#include "kernels/cpu/adam_kernel.h"

#include <cmath>

namespace ds::kernels {

AdamStepConstants adamStepConstants(double lr, double beta1, double beta2, double eps,
                                    double weightDecay, bool decoupledDecay, int64_t step,
                                    bool biasCorrection) {
  double stepSize = lr, invSqrtBc2 = 1.0;
  if (biasCorrection) {
    stepSize = lr / (1.0 - std::pow(beta1, static_cast<double>(step)));
    invSqrtBc2 = 1.0 / std::sqrt(1.0 - std::pow(beta2, static_cast<double>(step)));
  }
  AdamStepConstants c{};
  c.beta1 = static_cast<float>(beta1);
  c.beta2 = static_cast<float>(beta2);
  c.oneMinusBeta1 = static_cast<float>(1.0 - beta1);
  c.oneMinusBeta2 = static_cast<float>(1.0 - beta2);
  c.eps = static_cast<float>(eps);
  c.stepSize = static_cast<float>(stepSize);
  c.invSqrtBc2 = static_cast<float>(invSqrtBc2);
  c.weightDecay = static_cast<float>(weightDecay);
  c.decayFactor = static_cast<float>(1.0 - lr * weightDecay);
  c.decoupledDecay = decoupledDecay;
  return c;
}

void adamUpdate(float* params, const float* grads, float* m, float* v, size_t count,
                const AdamStepConstants& c) {
  for (size_t i = 0; i < count; ++i) {
    float g = grads[i];
    if (c.decoupledDecay) {
      params[i] *= c.decayFactor;
    } else {
      g += c.weightDecay * params[i];
    }
    m[i] = c.beta1 * m[i] + c.oneMinusBeta1 * g;
    v[i] = c.beta2 * v[i] + c.oneMinusBeta2 * g * g;
    const float denom = std::sqrt(v[i]) * c.invSqrtBc2 + c.eps;
    params[i] -= c.stepSize * m[i] / denom;
  }
}

}  // namespace ds::kernels
