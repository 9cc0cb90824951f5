// LrSchedule: the learning rate (and, for OneCycle, momentum) used by each optimizer update, as
// DeepSpeed's lr_schedules.py sets it when its engine steps the scheduler after each update.
// The five schedules live in their own files; makeLrSchedule picks one from the config.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "runtime/config/scheduler_config.h"

namespace ds::runtime {

// Stepping contract (DeepSpeed's engine: optimizer.step(), then scheduler.step() unless the step
// overflowed): update 0 uses lr() as constructed; after update i, call step() once, and update
// i + 1 uses the new lr(). Never step() after a skipped update.
class LrSchedule {
 public:
  virtual ~LrSchedule() = default;
  virtual double lr() const = 0;
  // Set only while OneCycle cycles momentum (cycle_momentum, its default). DeepSpeed writes it
  // into betas[0] of optimizers that have betas (Adam, AdamW, Lamb) and disables cycling, with a
  // warning, for those that have none (torch SGD): the caller must not apply it to SGD momentum.
  virtual std::optional<double> momentum() const = 0;
  // While momentum() is set, DeepSpeed's OneCycle writes betas = (momentum, 0.99): beta2 too.
  static constexpr double kCycledBeta2 = 0.99;
  virtual void step() = 0;
  // DeepSpeed's last_batch_iteration: -1 before the first step(). Restoring a checkpointed value
  // reproduces lr() and momentum() exactly (what DeepSpeed's restored optimizer groups hold).
  virtual int64_t lastBatchIteration() const = 0;
  virtual void setLastBatchIteration(int64_t iteration) = 0;
};

// optimizerLr: the optimizer's configured lr. WarmupCosineLR scales it; WarmupLR without
// warmup_max_lr warms up to it. optimizerMomentum: its beta1 (or SGD momentum). Both are also what
// update 0 uses when the config sets last_batch_iteration != -1: DeepSpeed's constructors then
// leave the optimizer untouched until the first step(). Throws ds::Error on invalid params.
std::unique_ptr<LrSchedule> makeLrSchedule(const SchedulerConfig& config, double optimizerLr,
                                           double optimizerMomentum);

}  // namespace ds::runtime
