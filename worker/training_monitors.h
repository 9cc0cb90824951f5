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

namespace ds::worker {

class TrainingMonitors {
 public:
  // Prints where each monitor writes (rank 0).
  TrainingMonitors(const runtime::DeepSpeedConfig& config, int rank);
  // Train/Samples/train_loss (at the samples seen before the step), lr and fp16's loss_scale (at
  // the samples seen after it), and with wall_clock_breakdown the step's elapsed_time_ms_*.
  void afterStep(const runtime::Engine& engine, double loss);
  void write(const std::vector<runtime::MonitorEvent>& events);
  bool active() const { return csv_ || tensorboard_; }

 private:
  const runtime::DeepSpeedConfig& config_;
  std::unique_ptr<runtime::CsvMonitor> csv_;
  std::unique_ptr<runtime::TensorBoardMonitor> tensorboard_;
};

}  // namespace ds::worker
