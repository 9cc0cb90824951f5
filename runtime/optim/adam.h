// Adam / AdamW (torch.optim.Adam / AdamW numerics, DeepSpeed's FusedAdam options) over one shard
// [begin, end) of the flat parameter buffer. Moments exist only for that range, which is where
// ZeRO's optimizer-state saving comes from. Weight decay applies to specs marked weightDecay.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/accelerator.h"
#include "runtime/config/optimizer_config.h"
#include "runtime/model/model.h"
#include "runtime/optim/optimizer.h"
#include "runtime/optim/shard_segments.h"

namespace ds::runtime {

class Adam : public Optimizer {
 public:
  // The element loop runs as acc.adamStep over buffers on acc's device.
  Adam(const AdamParams& params, const std::vector<ParamSpec>& specs, size_t begin, size_t end,
       kernels::Accelerator& acc = kernels::accelerator(DeviceKind::Cpu));

  // step.momentum, when set, replaces beta1 for this step (bias correction included), as
  // OneCycle does to torch's group["betas"].
  void step(float* params, const float* grads, const OptimizerStep& step) override;
  bool fusesHalfCopy() const override { return true; }
  int64_t steps() const override { return steps_; }
  void setSteps(int64_t steps) override { steps_ = steps; }
  const char* name() const override { return "Adam"; }

 private:
  AdamParams params_;
  kernels::Accelerator* acc_;
  std::vector<ShardSegment> runs_;  // merged by decay flag
  int64_t steps_ = 0;
};

}  // namespace ds::runtime
