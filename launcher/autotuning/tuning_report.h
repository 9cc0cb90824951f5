// What the autotuner tells: one record per candidate (pruned, run, reused, failed), the table of
// what was tried with predicted against measured memory and metric, and the files in results_dir
// (summary.txt, summary.json; the winner's files are the autotuner's).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "launcher/autotuning/experiment_runner.h"
#include "launcher/autotuning/tuning_space.h"
#include "runtime/config/autotuning_config.h"

namespace ds::launcher {

struct ExperimentRecord {
  TuningChoice choice;
  std::string name;
  std::optional<double> predictedPeakBytes;  // per rank; nullopt: not sized (a program)
  std::string pruned;                        // set: never run, and why
  std::string prunedBy;  // which check set it aside ("the config rules", ...), for the table
  bool ran = false, reused = false;
  std::optional<double> predictedMetric;  // when it was chosen
  ExperimentStatus status = ExperimentStatus::Failed;
  std::optional<double> metric;
  std::optional<double> measuredPeakBytes;  // the largest of any rank's
  double stepSeconds = 0, wallSeconds = 0;
  std::string why;  // a failure's cause
};

// "samples/s", "us/step", "FLOPS/rank": the unit of a metric in tables.
const char* metricUnit(runtime::TuningMetric metric);

// The experiments that ran (in run order) and, below, formatSetAside's lines.
std::string formatTuningTable(const std::vector<ExperimentRecord>& records,
                              const std::vector<size_t>& runOrder, runtime::TuningMetric metric,
                              std::optional<size_t> best);

// The candidates set aside before running, one line per check that did it.
std::string formatSetAside(const std::vector<ExperimentRecord>& records);

// summary.txt (the table and the outcome) and summary.json (every record) in `resultsDir`.
void writeTuningSummary(const std::string& resultsDir, const std::vector<ExperimentRecord>& records,
                        const std::vector<size_t>& runOrder, runtime::TuningMetric metric,
                        std::optional<size_t> best, const std::string& outcome);

}  // namespace ds::launcher
