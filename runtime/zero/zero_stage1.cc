// ZeRO stage 1: the fp32 master weights and optimizer states of the own slices only. Gradients
// accumulate whole; at the boundary each bucket is reduce-scattered into the own slices.
#include "runtime/zero/parallel_passes.h"
#include "runtime/zero/zero_stages.h"

namespace ds::runtime {

void ZeroStage1::initialise(const InitialValues& draw) {
  fillWholeWorkingCopy(draw);
  master_.resize(shardLayout_->shardSize());  // filled by fillMaster
  grads_.assign(ctx_.count * dtypeBytes(ctx_.gradType), 0);
}

void ZeroStage1::loadGroupGradients(size_t t0, size_t t1, std::vector<float>& out, float unscale) {
  // The own slices sit in the whole (flat) gradient buffer: unscaled as they are taken out, on
  // the kernels' threads, a run of tensors each.
  out.resize(shardLayout_->chunk(t0, t1));
  const size_t groupBegin = shardLayout_->shardBegin(t0);
  forEachTensor(
      t1 - t0, [&](size_t i) { return layout_->tensor(t0 + i).slice; },
      [&](size_t i) {
        layout_->extractShard(grads_.data(), ctx_.gradType, 0, t0 + i, t0 + i + 1,
                              out.data() + shardLayout_->shardBegin(t0 + i) - groupBegin,
                              DType::F32, unscale);
      });
}

char* ZeroStage1::halfCopyTarget() {
  halfShard_.resize(shardLayout_->shardSize() * dtypeBytes(ctx_.modelType));
  return halfShard_.data();
}

}  // namespace ds::runtime
