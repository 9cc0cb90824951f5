// The fused Adam/AdamW element update on flat fp32 arrays: one pass over params, grads and the two
// moments. This scalar loop is the reference CPU-Adam's SIMD paths (cpu_adam.h) equal bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>

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

// The constants of update number `step` (1-based): computed in double and rounded once, as torch
// computes them in Python floats. biasCorrection false: stepSize = lr, invSqrtBc2 = 1.
AdamStepConstants adamStepConstants(double lr, double beta1, double beta2, double eps,
                                    double weightDecay, bool decoupledDecay, int64_t step,
                                    bool biasCorrection = true);

void adamUpdate(float* params, const float* grads, float* m, float* v, size_t count,
                const AdamStepConstants& c);

}  // namespace ds::kernels
