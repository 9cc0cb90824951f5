// IterationSchedule: the state all five DeepSpeed schedules share. Each is a pure function of
// last_batch_iteration (>= -1), except right after construction with last_batch_iteration != -1,
// when DeepSpeed leaves the optimizer's own lr and momentum in place until the first step().
#pragma once

#include <string>

#include "common/error.h"
#include "runtime/lr/lr_schedule.h"

namespace ds::runtime {

class IterationSchedule : public LrSchedule {
 public:
  double lr() const override { return lr_; }
  std::optional<double> momentum() const override { return momentum_; }
  void step() override { setLastBatchIteration(last_ + 1); }
  int64_t lastBatchIteration() const override { return last_; }
  void setLastBatchIteration(int64_t iteration) override {
    if (iteration < -1) {
      throw Error("LrSchedule::setLastBatchIteration: expected an iteration >= -1, got " +
                  std::to_string(iteration));
    }
    last_ = iteration;
    lr_ = lrAt(iteration);
    momentum_ = momentumAt(iteration);
  }

 protected:
  // Call at the end of the derived constructor: lrAt / momentumAt are virtual.
  void start(int64_t lastBatchIteration, double optimizerLr, double optimizerMomentum) {
    setLastBatchIteration(lastBatchIteration);
    if (lastBatchIteration != -1) {
      lr_ = optimizerLr;
      if (momentum_) momentum_ = optimizerMomentum;
    }
  }
  // The value DeepSpeed's scheduler sets once last_batch_iteration == iteration; -1 is what its
  // constructor sets.
  virtual double lrAt(int64_t iteration) const = 0;
  virtual std::optional<double> momentumAt(int64_t) const { return std::nullopt; }

 private:
  int64_t last_ = -1;
  double lr_ = 0.0;
  std::optional<double> momentum_;
};

}  // namespace ds::runtime
