// Sgd: torch.optim.SGD's single-tensor update, element by element, in its operation order:
//   d = g + wd p;  buf = d (first step) or mom buf + (1 - dampening) d;
//   d = nesterov ? d + mom buf : buf;  p = p - lr d
#include "runtime/optim/sgd.h"

#include <string>

#include "common/error.h"

namespace ds::runtime {

Sgd::Sgd(const SgdParams& params, const std::vector<ParamSpec>& specs, size_t begin, size_t end)
    : params_(params),
      runs_(mergeByDecay(shardSegments(specs, begin, end))),
      hasBuffer_(params.momentum != 0.0) {
  if (hasBuffer_) addState("momentum_buffer", end - begin);
}

void Sgd::step(float* params, const float* grads, const OptimizerStep& step) {
  const double momentum = step.momentum.value_or(params_.momentum);
  if (momentum != 0.0 && params_.momentum == 0.0) {
    throw Error("SGD: this step asks for momentum " + std::to_string(momentum) +
                " (a schedule's cycle_momentum?) but optimizer.params.momentum is 0, so there is "
                "no momentum buffer; set optimizer.params.momentum > 0 or turn cycle_momentum off");
  }
  ++steps_;
  const float lr = static_cast<float>(step.lr);
  const float mom = static_cast<float>(momentum);
  const float keep = static_cast<float>(1.0 - params_.dampening);
  const bool useMomentum = momentum != 0.0, first = !bufferStarted_;
  float* buffer = useMomentum ? state(0) : nullptr;
  for (const ShardSegment& run : runs_) {
    const float wd = run.decay ? static_cast<float>(params_.weightDecay) : 0.0f;
    for (size_t j = run.begin; j < run.end; ++j) {
      float d = grads[j];
      if (wd != 0.0f) d += wd * params[j];  // torch skips the add (and its NaN/inf) at wd 0
      if (useMomentum) {
        float& buf = buffer[j];
        buf = first ? d : mom * buf + keep * d;
        d = params_.nesterov ? d + mom * buf : buf;
      }
      params[j] -= lr * d;
    }
  }
  if (useMomentum) bufferStarted_ = true;
}

void Sgd::setSteps(int64_t steps) {
  steps_ = steps;
  bufferStarted_ = steps > 0 && hasBuffer_;
}

}  // namespace ds::runtime
