#include "runtime/train/training_monitors.h"

#include <cstdio>

#include "runtime/train/step_timers.h"

namespace ds::runtime {

TrainingMonitors::TrainingMonitors(const DeepSpeedConfig& config, int rank)
    : config_(config) {
  if (rank != 0) return;
  if (config.csvMonitor.enabled) {
    csv_ = std::make_unique<CsvMonitor>(config.csvMonitor);
    std::printf("csv_monitor: writing %s\n", csv_->directory().c_str());
  }
  if (config.tensorboard.enabled) {
    tensorboard_ = std::make_unique<TensorBoardMonitor>(config.tensorboard);
    std::printf("tensorboard: writing %s\n", tensorboard_->path().c_str());
  }
}

void TrainingMonitors::write(const std::vector<MonitorEvent>& events) {
  if (csv_) csv_->write(events);
  if (tensorboard_) tensorboard_->write(events);
}

void TrainingMonitors::stepDone(const StepDone& done) {
  if (!active()) return;
  const Engine& engine = done.engine;
  const double loss = done.loss;
  const int64_t samples = engine.globalSamples();
  const int64_t batch = config_.batch.trainBatchSize;
  std::vector<MonitorEvent> events = {
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

}  // namespace ds::runtime
