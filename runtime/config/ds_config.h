// The DeepSpeed JSON config (ds_config.json), parsed and validated once into typed structs.
// Only what this project implements is typed; other keys of the DeepSpeed reference are accepted
// and ignored, and keys nobody knows become warnings. JSON stays out of this header.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/config/batch_size.h"

namespace ds::runtime {

enum class OptimizerType { Adam, AdamW };

// Defaults are DeepSpeed's FusedAdam ones; adam_w_mode defaults to true there too.
struct AdamParams {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weightDecay = 0.0;
  bool adamWMode = true;  // decoupled weight decay; false = L2 added to the gradient
};

struct OptimizerConfig {
  OptimizerType type = OptimizerType::Adam;
  AdamParams params;
};

enum class WarmupType { Log, Linear };

// DeepSpeed's WarmupLR defaults. warmupNumSteps is stored as written: DeepSpeed's scheduler
// uses max(2, warmup_num_steps), and applying that is the scheduler's job.
struct WarmupLrParams {
  double warmupMinLr = 0.0;
  double warmupMaxLr = 0.001;
  int64_t warmupNumSteps = 1000;
  WarmupType warmupType = WarmupType::Log;
};

struct SchedulerConfig {
  WarmupLrParams warmupLr;  // WarmupLR is the only scheduler implemented so far
};

// DeepSpeed's comms_logger block.
struct CommsLoggerConfig {
  bool enabled = false;
  bool verbose = false;  // print every op as it happens
  bool profAll = true;   // false: only the ops in profOps
  bool debug = false;    // accepted; there is no Python caller to append
  std::vector<std::string> profOps;
};

struct DeepSpeedConfig {
  BatchConfig batch;
  std::optional<OptimizerConfig> optimizer;  // absent block -> nullopt
  std::optional<SchedulerConfig> scheduler;  // absent block -> nullopt
  double gradientClipping = 0.0;             // 0 = off
  int64_t stepsPerPrint = 10;
  int zeroStage = 0;  // 0 or 1; stages 2 and 3 are rejected for now
  CommsLoggerConfig commsLogger;
  // This project's key: which collectives backend the world group uses. "auto" (default): shared
  // memory on one host, hierarchical across hosts with equal ranks per host, else Gloo.
  std::string commBackend = "auto";   // auto | shm | hierarchical | gloo
  std::vector<std::string> warnings;  // unknown keys etc., one message each, ready to print
};

// Parses `jsonText`; `source` names the file in messages (e.g. "configs/ds_config.json").
// worldSize is the data-parallel world size used for batch inference.
// Throws ds::Error: "SOURCE: JSON.PATH: expected ..., got ...".
DeepSpeedConfig parseDeepSpeedConfig(std::string_view jsonText, int64_t worldSize,
                                     std::string_view source);

// Reads `path` and parses it; a missing or unreadable file is an error naming the path.
// The file's text, for shipping verbatim to workers; errors name the path.
std::string readDeepSpeedConfigText(const std::string& path);
DeepSpeedConfig loadDeepSpeedConfig(const std::string& path, int64_t worldSize);

}  // namespace ds::runtime
