// One autotuning experiment as a real job: ds-launch itself, started as a child with the user's
// flags and the experiment's config (the same processes and collectives as any launch), its
// stdout and stderr in the experiment's directory, stopped cleanly (SIGTERM: ds-launch tears its
// ranks down; SIGKILL to its group after a grace) on time-out or when the tuner is interrupted.
// A failed experiment (out of memory, a crash, no metric file) is an outcome, never an exception.
#pragma once

#include <atomic>
#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace ds::launcher {

struct ExperimentCommand {
  std::vector<std::string> argv;
  std::string dir;         // stdout.log and stderr.log go here
  std::string metricPath;  // where the job writes DeepSpeed's metric file
  std::chrono::seconds timeout{600};
};

enum class ExperimentStatus { Ok, Failed, TimedOut, Interrupted };
const char* experimentStatusName(ExperimentStatus status);  // "ok", "failed", ...

struct ExperimentOutcome {
  ExperimentStatus status = ExperimentStatus::Failed;
  int exitStatus = 0;
  double wallSeconds = 0;
  std::optional<nlohmann::json> metrics;  // the metric file, when the job wrote one
  std::string why;                        // for a failure: the job's last error line, or the cause
};

// Runs the experiment to its end; `interrupted` (set by a signal handler) stops it early.
ExperimentOutcome runExperiment(const ExperimentCommand& command,
                                const std::atomic<bool>& interrupted);

// The last line of `path` that says what went wrong ("error", "refused", "Killed"), or its last
// line: what a failed experiment reports.
std::string lastErrorLine(const std::string& path);

}  // namespace ds::launcher
