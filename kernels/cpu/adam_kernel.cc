// adamUpdate: PyTorch's operation order, so results match torch.optim.Adam/AdamW within rounding.
#include "kernels/cpu/adam_kernel.h"

#include <cmath>

namespace ds::kernels {

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
