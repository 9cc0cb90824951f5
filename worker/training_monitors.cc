#include "worker/training_monitors.h"

#include <cstdio>

#include "worker/step_timers.h"

namespace ds::worker {

TrainingMonitors::TrainingMonitors(const runtime::DeepSpeedConfig& config, int rank)
    : config_(config) {
  if (rank != 0) return;
  if (config.csvMonitor.enabled) {
    csv_ = std::make_unique<runtime::CsvMonitor>(config.csvMonitor);
    std::printf("csv_monitor: writing %s\n", csv_->directory().c_str());
  }
  if (config.tensorboard.enabled) {
    tensorboard_ = std::make_unique<runtime::TensorBoardMonitor>(config.tensorboard);
    std::printf("tensorboard: writing %s\n", tensorboard_->path().c_str());
  }
}

void TrainingMonitors::write(const std::vector<runtime::MonitorEvent>& events) {
  if (csv_) csv_->write(events);
  if (tensorboard_) tensorboard_->write(events);
}

void TrainingMonitors::afterStep(const runtime::Engine& engine, double loss) {
  if (!active()) return;
  const int64_t samples = engine.globalSamples();
  const int64_t batch = config_.batch.trainBatchSize;
  std::vector<runtime::MonitorEvent> events = {
      {"Train/Samples/train_loss", loss, samples - batch}, {"Train/Samples/lr", engine.lr(), samples}};
  if (config_.precision.modelDtype == DType::F16)
    events.push_back({"Train/Samples/loss_scale", engine.lossScale(), samples});
  if (config_.wallClockBreakdown) {  // DeepSpeed's timer events, milliseconds of this step
    for (const TimerValue& timer : stepTimers(engine.lastStepTimes()))
      events.push_back(
          {std::string("Train/Samples/elapsed_time_ms_") + timer.name, timer.ms, samples});
  }
  write(events);
}

}  // namespace ds::worker
