// The fused Adam/AdamW element update on flat fp32 arrays: one pass over params, grads and the two
// moments. Scalar and portable for now (the compiler vectorises it); the AVX-512/AVX2 paths chosen
// at run time come with CPU-Adam.
#pragma once

#include <cstddef>

namespace ds::kernels {

struct AdamStepConstants {
  float beta1, beta2, eps;
  // 1 - beta computed in double before rounding, as PyTorch does: 1.0f - 0.999f is off by 1.3e-5.
  float oneMinusBeta1, oneMinusBeta2;
  float stepSize;    // lr / (1 - beta1^t)
  float invSqrtBc2;  // 1 / sqrt(1 - beta2^t)
  float weightDecay;
  float decayFactor;    // 1 - lr * weightDecay, for decoupled (AdamW) decay
  bool decoupledDecay;  // true: AdamW; false: L2 added to the gradient
};

void adamUpdate(float* params, const float* grads, float* m, float* v, size_t count,
                const AdamStepConstants& c);

}  // namespace ds::kernels
