// ZeRO stage 2: gradients partitioned as well: the gradient buffer is the own shard, filled by
// reduce-scatters issued bucket by bucket during the backward pass.
#include "runtime/zero/zero_stages.h"

namespace ds::runtime {

void ZeroStage2::initialise(const InitialValues& draw) {
  fillWholeWorkingCopy(draw);
  const size_t shard = shardLayout_->shardSize();
  master_.resize(shard);  // filled by fillMaster
  grads_.assign(shard * dtypeBytes(ctx_.gradType), 0);
}

char* ZeroStage2::halfCopyTarget() {
  halfShard_.resize(shardLayout_->shardSize() * dtypeBytes(ctx_.modelType));
  return halfShard_.data();
}

}  // namespace ds::runtime
