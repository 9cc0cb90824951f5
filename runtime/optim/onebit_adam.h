// DeepSpeed's 1-bit Adam (deepspeed/runtime/fp16/onebit/adam.py; Tang et al., 2021) over one
// optimizer range [begin, end) of the flat parameters. For the first freeze_step steps it is
// Adam on the data group's averaged gradients (DeepSpeed's form: no bias correction, eps outside
// the square root, weight decay added to the update); then the variance is frozen and each step
// takes this rank's own gradients (takesLocalGradients: the engine skips their all-reduce),
// updates the momentum with them and averages the momentum over the data group with the 1-bit
// compressed all-reduce and its error feedback (runtime/comm/onebit_allreduce.h). Unlike
// DeepSpeed's, the first step updates the parameters (DeepSpeed's first step() only sets up its
// buffers), so the freeze comes after freeze_step updates rather than freeze_step - 1.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "runtime/comm/onebit_allreduce.h"
#include "runtime/config/optimizer_config.h"
#include "runtime/model/model.h"
#include "runtime/optim/optimizer.h"
#include "runtime/optim/shard_segments.h"

namespace ds::runtime {

class OneBitAdam : public Optimizer {
 public:
  OneBitAdam(const OneBitAdamParams& params, const std::vector<ParamSpec>& specs, size_t begin,
             size_t end);

  // Past the freeze, grads are this rank's own and step.dataGroup (every rank of it calls step
  // together) averages the momentum.
  void step(float* params, const float* grads, const OptimizerStep& step) override;
  bool takesLocalGradients() const override { return steps_ >= params_.freezeStep; }
  int64_t steps() const override { return steps_; }
  // A checkpoint's steps; the error feedback starts again from zero, as DeepSpeed's load does
  // (each rank's errors are its own and fit only the same world).
  void setSteps(int64_t steps) override;
  const char* name() const override { return "OneBitAdam"; }
  size_t feedbackBytes() const override {
    return (errors_.worker.capacity() + errors_.server.capacity()) * sizeof(float);
  }

 private:
  OneBitAdamParams params_;
  std::vector<ShardSegment> runs_;  // merged by decay flag
  size_t count_;
  int64_t steps_ = 0;
  OneBitErrors errors_;  // sized at the first compressed step, for its group
};

}  // namespace ds::runtime
