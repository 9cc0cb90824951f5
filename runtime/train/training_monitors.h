// The monitors of a training job (csv_monitor, tensorboard), opened on rank 0 only, and the
// events DeepSpeed's engine writes after each step. Shared by the MLP and GPT trainers.
#pragma once

#include <memory>
#include <vector>

#include "runtime/config/ds_config.h"
#include "runtime/engine/engine.h"
#include "runtime/monitor/csv_monitor.h"
#include "runtime/monitor/monitor_event.h"
#include "runtime/monitor/tensorboard_monitor.h"
#include "runtime/train/training_observer.h"

namespace ds::runtime {

class TrainingMonitors final : public TrainingObserver {
 public:
  // Prints where each monitor writes (rank 0).
  TrainingMonitors(const DeepSpeedConfig& config, int rank);
  // Train/Samples/train_loss (at the samples seen before the step), lr and fp16's loss_scale (at
  // the samples seen after it), and with wall_clock_breakdown the step's elapsed_time_ms_*.
  void stepDone(const StepDone& done) override;
  void write(const std::vector<MonitorEvent>& events);
  bool active() const { return csv_ || tensorboard_; }

 private:
  const DeepSpeedConfig& config_;
  std::unique_ptr<CsvMonitor> csv_;
  std::unique_ptr<TensorBoardMonitor> tensorboard_;
};

}  // namespace ds::runtime
