// makeLrSchedule: the schedule named by the config's scheduler.type.
#include "runtime/lr/lr_schedule.h"

#include "runtime/lr/lr_range_test.h"
#include "runtime/lr/neox_annealing_lr.h"
#include "runtime/lr/one_cycle.h"
#include "runtime/lr/warmup_cosine_lr.h"
#include "runtime/lr/warmup_decay_lr.h"
#include "runtime/lr/warmup_lr.h"

namespace ds::runtime {

std::unique_ptr<LrSchedule> makeLrSchedule(const SchedulerConfig& config, double optimizerLr,
                                           double optimizerMomentum) {
  const int64_t last = config.lastBatchIteration;
  switch (config.type) {
    case SchedulerType::WarmupLr:
      return std::make_unique<WarmupLr>(config.warmupLr, last, optimizerLr, optimizerMomentum);
    case SchedulerType::WarmupDecayLr:
      return std::make_unique<WarmupDecayLr>(config.warmupDecayLr, last, optimizerLr,
                                             optimizerMomentum);
    case SchedulerType::WarmupCosineLr:
      return std::make_unique<WarmupCosineLr>(config.warmupCosineLr, last, optimizerLr,
                                              optimizerMomentum);
    case SchedulerType::OneCycle:
      return std::make_unique<OneCycle>(config.oneCycle, last, optimizerLr, optimizerMomentum);
    case SchedulerType::LrRangeTest:
      return std::make_unique<LrRangeTest>(config.lrRangeTest, last, optimizerLr,
                                           optimizerMomentum);
    case SchedulerType::NeoxAnnealing:
      return std::make_unique<NeoxAnnealingLr>(config.neoxAnnealing, last);
  }
  throw Error("makeLrSchedule: unknown SchedulerType " +
              std::to_string(static_cast<int>(config.type)));
}

}  // namespace ds::runtime
