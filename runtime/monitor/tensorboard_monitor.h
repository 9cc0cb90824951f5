// DeepSpeed's tensorboard monitor without TensorFlow: rank 0 writes a real TensorBoard event file,
// OUTPUT_PATH/JOB_NAME/events.out.tfevents.<time>.<host>, in the TFRecord format (u64 length,
// masked CRC32C of the length, the record, masked CRC32C of the record) holding Event protocol
// buffers (wall_time, step, and a Summary with one simple_value per event; the messages are
// runtime/monitor/tensorboard_event.proto, a subset of TensorFlow's).
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "runtime/monitor/monitor_event.h"

namespace ds::runtime {

struct TensorBoardConfig {
  bool enabled = false;
  std::string outputPath;
  std::string jobName = "DeepSpeedJobName";
};

// One serialized Event: the file's first record ("brain.Event:2" at step 0), and a scalar's.
std::string fileVersionEvent(double wallTime);
std::string scalarEvent(double wallTime, int64_t step, const std::string& tag, float value);

class TensorBoardMonitor {
 public:
  explicit TensorBoardMonitor(const TensorBoardConfig& config);  // creates the file
  void write(const std::vector<MonitorEvent>& events);           // one Event per event, flushed
  const std::string& path() const { return path_; }

 private:
  void writeRecord(const std::string& record);

  std::string path_;
  std::ofstream out_;
};

}  // namespace ds::runtime
