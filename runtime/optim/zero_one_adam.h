// DeepSpeed's 0/1 Adam (deepspeed/runtime/fp16/onebit/zoadam.py; Lu et al., 2022) over one
// optimizer range [begin, end) of the flat parameters. Two phases:
// - The variance phase (the first var_freeze_step steps): the variance is updated only at steps
//   that divide by var_interval, which doubles after every var_update_scaler such updates. Those
//   steps take the data group's averaged gradients (as Adam); every other step takes this rank's
//   own gradients (takesLocalGradients) and averages them with the 1-bit compressed all-reduce
//   before the momentum takes them.
// - The local-step phase: the variance is frozen, every step is local (the momentum and the
//   parameters move on this rank's gradients alone) and the parameters' accumulated updates are
//   exchanged, 1-bit compressed, only at steps that divide by local_step_interval, which doubles
//   every local_step_scaler steps up to local_step_clipper. The exchange replaces the rank's own
//   local updates by the group's average and resets the momentum to it (DeepSpeed's u / lrs).
// Both exchanges go tensor by tensor, as DeepSpeed's (each tensor its own scales and error
// feedback): one scale for tensors whose gradients differ by orders of magnitude would give the
// small ones the large ones' size. (1-bit Adam and 1-bit LAMB exchange one flat buffer, LAMB
// with its momentum scaled per tensor first, as DeepSpeed's.)
// DeepSpeed's update form: no bias correction, eps outside the square root, weight decay added
// to the update. Where we differ from DeepSpeed, and why:
// - The first step updates the parameters (DeepSpeed's first step() only sets up its buffers),
//   so step t here is DeepSpeed's step t + 1, and var_freeze_step counts updates.
// - The variance and local-step schedules are functions of the step count: a checkpoint resumes
//   them where they were (DeepSpeed's load starts both again from interval 1).
// - With one rank the variance phase's other steps take the gradient as it is (it is the
//   group's average); DeepSpeed's skip the momentum update there.
// - An exchange's momentum leaves out the updates' weight decay. DeepSpeed's (-u / lrs) keeps
//   it, and every exchange feeds it back into the next local steps' updates, compounding the
//   decay about 1 / (1 - beta1)-fold at an interval of one step.
// - Each element of the variance phase's compressed gradient is bounded by its own root-mean-
//   square gradient (boundByVariance), where DeepSpeed's users mask parameters by hand
//   (exp_avg_mask).
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

class ZeroOneAdam : public Optimizer {
 public:
  ZeroOneAdam(const ZeroOneAdamParams& params, const std::vector<ParamSpec>& specs, size_t begin,
              size_t end);

  void step(float* params, const float* grads, const OptimizerStep& step) override;
  bool takesLocalGradients() const override;
  int64_t steps() const override { return steps_; }
  // The schedules replayed to `steps`; the error feedback, the accumulated local updates and
  // their learning-rate sum start again from zero, as DeepSpeed's load does (they are this rank's
  // own and the checkpoint holds one rank's parameters).
  void setSteps(int64_t steps) override;
  const char* name() const override { return "ZeroOneAdam"; }
  size_t feedbackBytes() const override;

  // The schedule's state after a number of steps, as DeepSpeed's per-tensor counters hold it.
  struct Schedule {
    int64_t varInterval = 1, varCounter = 0;
    int64_t localInterval = 1, localCounter = 0;
  };
  const Schedule& schedule() const { return schedule_; }

 private:
  bool frozen() const { return steps_ >= params_.varFreezeStep; }
  // Step `t`'s (1-based) schedule bookkeeping, after its update.
  void advanceSchedule(int64_t t);
  // In place: the data group's compressed average of data[0, count_), tensor by tensor; false
  // (nothing done) with one rank.
  bool compressedAverage(float* data, const OptimizerStep& step);
  // Each element of the variance phase's compressed gradient clamped to factor x (sqrt(v) +
  // eps), its own root-mean-square gradient: the 1-bit average gives every element of a tensor
  // one magnitude, the tensor's, and an element whose gradients are far smaller would otherwise
  // step by that magnitude over its own small denominator, hundreds of times Adam's step (the
  // demo's model jumped from 2.0 to 10 that way). DeepSpeed's users mask such parameters
  // (exp_avg_mask). The local phase's exchange is not bounded: its momentum may outgrow the
  // frozen variance, and a bound there held the toy model of test_engine_onebit.cc 18% behind.
  void boundByVariance(float* x, const float* v, float factor) const;

  ZeroOneAdamParams params_;
  std::vector<ShardSegment> segments_;  // one per tensor
  size_t count_;
  int64_t steps_ = 0;
  Schedule schedule_;
  // The variance phase's scratch for the compressed gradient, then the local phase's
  // accumulated parameter updates (DeepSpeed's momentum_accumulator, u), with the sum of the
  // learning rates since the last exchange (its lrs).
  std::vector<float> accumulator_;
  double lrSum_ = 0;
  std::vector<OneBitErrors> errors_;  // per tensor, sized at the first exchange for its group
};

}  // namespace ds::runtime
