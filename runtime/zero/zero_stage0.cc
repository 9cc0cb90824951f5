// ZeRO stage 0: plain data parallelism on the engine's buffers. The optimizer's shard is the
// whole model; gradients accumulate whole and are all-reduced at the boundary.
#include <cmath>

#include "runtime/zero/parallel_passes.h"
#include "runtime/zero/square_sum.h"
#include "runtime/zero/zero_stages.h"

namespace ds::runtime {

void ZeroStage0::initialise(const InitialValues& draw) {
  fillWholeWorkingCopy(draw);
  // fp32 working parameters are the master weights themselves (the shard is everything).
  if (ctx_.modelType != DType::F32) {
    master_.resize(shardLayout_->shardSize());  // filled by fillMaster
  }
  grads_.assign(ctx_.count * dtypeBytes(ctx_.gradType), 0);
}

GradientStatistics ZeroStage0::gradientStatistics(const std::vector<std::pair<size_t, size_t>>&,
                                                  float unscale, std::vector<float>&) {
  // Stage 0 holds every gradient but takes the slices stage 1 would own, in the same order, so
  // the norm has the same bits at every stage.
  GradientStatistics out;
  const size_t bytes = dtypeBytes(ctx_.gradType);
  const int rank = ctx_.comm.rank();
  auto slice = [&](size_t t) {  // [begin, end) of tensor t: the slice stage 1 would give this rank
    const TensorPlacement& p = layout_->tensor(t);
    if (local_) return std::pair<size_t, size_t>(0, p.numel);
    const size_t begin = std::min(p.numel, rank * p.slice);
    return std::pair<size_t, size_t>(begin, std::min(p.numel, begin + p.slice));
  };
  const std::vector<double> totals = perTensorTotals(
      ctx_.specs.size(),
      [&](size_t t) {
        const auto [begin, end] = slice(t);
        return end - begin;
      },
      [&](size_t t) {
        const auto [begin, end] = slice(t);
        const size_t at = layout_->tensor(t).flatOffset;
        return unscaledSquareSum(grads_.data() + (at + begin) * bytes, end - begin, unscale);
      });
  for (size_t t = 0; t < ctx_.specs.size(); ++t)
    addTensorStatistics(out, totals[t], ctx_.specs[t].countInGradNorm);
  return out;
}

}  // namespace ds::runtime
