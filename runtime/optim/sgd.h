// SGD with momentum, dampening, Nesterov and L2 weight decay (torch.optim.SGD numerics) over one
// shard [begin, end) of the flat parameter buffer. Weight decay applies to specs marked
// weightDecay. What DeepSpeed runs for optimizer type "SGD" (it hands the block to torch.optim).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "runtime/config/optimizer_config.h"
#include "runtime/model/model.h"
#include "runtime/optim/optimizer.h"
#include "runtime/optim/shard_segments.h"

namespace ds::runtime {

class Sgd : public Optimizer {
 public:
  // The momentum buffer is allocated only when params.momentum != 0 (plain SGD has no state).
  Sgd(const SgdParams& params, const std::vector<ParamSpec>& specs, size_t begin, size_t end);

  // step.momentum, when set, replaces the momentum for this step (OneCycle). A non-zero momentum
  // on an optimizer configured without one throws ds::Error: there is no buffer to keep it in.
  void step(float* params, const float* grads, const OptimizerStep& step) override;
  int64_t steps() const override { return steps_; }
  // steps > 0 marks a restored buffer as live; torch starts a buffer as a copy of the first
  // gradient, so a fresh one must not be decayed.
  void setSteps(int64_t steps) override;
  const char* name() const override { return "SGD"; }

 private:
  SgdParams params_;
  std::vector<ShardSegment> runs_;  // merged by decay flag
  bool hasBuffer_;  // state array 0, {"momentum_buffer"}, exists only with momentum
  bool bufferStarted_ = false;
  int64_t steps_ = 0;
};

}  // namespace ds::runtime
