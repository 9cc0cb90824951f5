#include "runtime/lr/neox_annealing_lr.h"

#include <algorithm>
#include <cmath>

namespace ds::runtime {

NeoxAnnealingLr::NeoxAnnealingLr(const NeoxAnnealingParams& params, int64_t lastBatchIteration)
    : p_(params) {
  start(lastBatchIteration, p_.maxLr, 0.0);
  setLastBatchIteration(lastBatchIteration);  // NeoX restores the schedule's own value
}

double NeoxAnnealingLr::lrAt(int64_t iteration) const {
  const double n = static_cast<double>(iteration + 1);  // NeoX's num_iters of the next update
  const double warmup = static_cast<double>(p_.warmupIters);
  if (p_.warmupIters > 0 && n <= warmup) return p_.maxLr * n / warmup;
  const double span = static_cast<double>(p_.decayIters) - warmup;
  const double since = std::min(n - warmup, span);  // past decayIters: stay at the end value
  double lr = p_.maxLr;
  if (span > 0 && p_.style == LrDecayStyle::Linear) lr = p_.maxLr * (span - since) / span;
  if (span > 0 && p_.style == LrDecayStyle::Cosine)
    lr = p_.minLr + (p_.maxLr - p_.minLr) / 2.0 * (std::cos(M_PI * since / span) + 1.0);
  return std::max(lr, p_.minLr);
}

}  // namespace ds::runtime
