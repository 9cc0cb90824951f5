// DeepSpeed's csv_monitor: on rank 0, one CSV file per event name under OUTPUT_PATH/JOB_NAME,
// named after the event with '/' and ' ' turned into '_' ("Train_Samples_train_loss.csv"), a
// header row "step,<last part of the name>", then one "step,value" row per event, written as
// Python's csv module writes them (CRLF rows, floats as repr() prints them).
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "runtime/monitor/monitor_event.h"

namespace ds::runtime {

struct CsvMonitorConfig {
  bool enabled = false;
  std::string outputPath;                    // "" : relative to the working directory
  std::string jobName = "DeepSpeedJobName";  // DeepSpeed's default
};

// repr() of a Python float: the shortest text that reads back the same double, with ".0" on
// integral values ("2.0", "0.001", "1e-05", "1e+16", "inf", "nan").
std::string pythonFloat(double value);

class CsvMonitor {
 public:
  explicit CsvMonitor(const CsvMonitorConfig& config);  // creates the directory
  void write(const std::vector<MonitorEvent>& events);  // throws ds::Error naming the file
  const std::string& directory() const { return dir_; }

 private:
  std::string dir_;
  std::set<std::string> started_;  // files that have their header
};

}  // namespace ds::runtime
