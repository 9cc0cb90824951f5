// What a training run hands back to its job: how far it got, its last loss and speed, and the
// comms logger's summary (filled by the job, which owns the logger).
#pragma once

#include <cstdint>
#include <vector>

#include "common/comm_stat.h"

namespace ds::runtime {

struct TrainResult {
  int64_t steps = 0;
  double lastLoss = 0.0;
  double wallSeconds = 0.0;
  double samplesPerSecond = 0.0;
  double profiledStepSeconds = 0.0;     // LoopSettings::profileFrom..profileTo, per step (0: none)
  std::vector<ds::CommStat> commStats;  // comms_logger summary (empty when disabled)
};

}  // namespace ds::runtime
