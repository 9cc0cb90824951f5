// Lamb: two passes over the shard. Pass 1 updates the moments and sums ||p||^2 and ||u||^2 per
// tensor; the sums are completed across shards; pass 2 recomputes u (as the CUDA kernel does, so
// no update buffer is kept) and applies it scaled by the tensor's trust ratio.
#include "runtime/optim/lamb.h"

#include <algorithm>
#include <cmath>

namespace ds::runtime {
namespace {

struct LambConstants {
  float beta1, beta2, oneMinusBeta1, oneMinusBeta2, eps;
  bool epsInsideSqrt;
};

// The update direction of one element from its already-updated moments. Both passes call this, so
// pass 2 reproduces pass 1's u exactly.
inline float lambDirection(float m, float v, float p, float decay, const LambConstants& c) {
  const float denom = c.epsInsideSqrt ? std::sqrt(v + c.eps) : std::sqrt(v) + c.eps;
  return m / denom + decay * p;
}

}  // namespace

Lamb::Lamb(const LambParams& params, const std::vector<ParamSpec>& specs, size_t begin, size_t end)
    : params_(params),
      segments_(shardSegments(specs, begin, end)),
      sums_(2 * specs.size(), 0.0),
      coeffs_(specs.size(), 1.0f) {
  addState("exp_avg", end - begin);
  addState("exp_avg_sq", end - begin);
}

void Lamb::step(float* params, const float* grads, const OptimizerStep& step) {
  ++steps_;
  const double beta1 = step.momentum.value_or(params_.beta1);
  const double beta2 = step.beta2.value_or(params_.beta2);
  double stepSize = step.lr;
  if (params_.biasCorrection) {
    const double t = static_cast<double>(steps_);
    stepSize = step.lr * std::sqrt(1.0 - std::pow(beta2, t)) / (1.0 - std::pow(beta1, t));
  }
  const LambConstants c{static_cast<float>(beta1),       static_cast<float>(beta2),
                        static_cast<float>(1.0 - beta1), static_cast<float>(1.0 - beta2),
                        static_cast<float>(params_.eps), params_.epsInsideSqrt};
  const float weightDecay = static_cast<float>(params_.weightDecay);

  float* m = state(0);
  float* v = state(1);
  std::fill(sums_.begin(), sums_.end(), 0.0);
  for (const ShardSegment& seg : segments_) {
    const float decay = seg.decay ? weightDecay : 0.0f;
    double pSquares = 0.0, uSquares = 0.0;
    for (size_t j = seg.begin; j < seg.end; ++j) {
      const float g = grads[j];
      m[j] = c.beta1 * m[j] + c.oneMinusBeta1 * g;
      v[j] = c.beta2 * v[j] + c.oneMinusBeta2 * g * g;
      const float u = lambDirection(m[j], v[j], params[j], decay, c);
      // fp32 squares are exact in double, so only the summation order can differ between shard
      // layouts.
      pSquares += static_cast<double>(params[j]) * params[j];
      uSquares += static_cast<double>(u) * u;
    }
    sums_[2 * seg.tensor] += pSquares;
    sums_[2 * seg.tensor + 1] += uSquares;
  }
  if (step.sumAcrossShards && !sums_.empty()) step.sumAcrossShards(sums_.data(), sums_.size());

  for (size_t t = 0; t < coeffs_.size(); ++t) {
    const double wNorm = std::sqrt(sums_[2 * t]), uNorm = std::sqrt(sums_[2 * t + 1]);
    double coeff = 1.0;
    if (wNorm != 0.0 && uNorm != 0.0) {
      // The kernel's order: max first, then min (min wins if a caller passes min > max).
      coeff = std::max(std::min(wNorm / uNorm, params_.maxCoeff), params_.minCoeff);
    }
    coeffs_[t] = static_cast<float>(coeff);
  }
  const float stepSizeF = static_cast<float>(stepSize);
  for (const ShardSegment& seg : segments_) {
    const float decay = seg.decay ? weightDecay : 0.0f;
    const float scale = stepSizeF * coeffs_[seg.tensor];
    for (size_t j = seg.begin; j < seg.end; ++j)
      params[j] -= scale * lambDirection(m[j], v[j], params[j], decay, c);
  }
}

}  // namespace ds::runtime
