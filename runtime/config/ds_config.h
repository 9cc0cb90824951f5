// The DeepSpeed JSON config (ds_config.json), parsed and validated once into typed structs.
// Only what this project implements is typed; every other key of the DeepSpeed reference is
// classified by the policy table (config_policy.h): type-checked, and an error when it switches on
// a feature that is not implemented. Keys nobody knows become warnings. JSON stays out of here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/comm_backend.h"
#include "runtime/comm/comms_logger_config.h"
#include "runtime/config/autotuning_config.h"
#include "runtime/config/batch_size.h"
#include "runtime/config/config_policy.h"
#include "runtime/config/immutable_elastic_config.h"
#include "runtime/config/optimizer_config.h"
#include "runtime/config/precision_config.h"
#include "runtime/config/scheduler_config.h"
#include "runtime/config/zero_config.h"
#include "runtime/monitor/csv_monitor.h"
#include "runtime/monitor/tensorboard_monitor.h"
#include "runtime/offload/aio_config.h"
#include "runtime/profiler/flops_profiler.h"

namespace ds::runtime {

struct DeepSpeedConfig {
  BatchConfig batch;
  std::optional<OptimizerConfig> optimizer;  // absent block -> nullopt
  std::optional<SchedulerConfig> scheduler;  // absent block -> nullopt
  double gradientClipping = 0.0;             // 0 = off
  int64_t stepsPerPrint = 10;
  ZeroConfig zero;
  PrecisionConfig precision;
  bool wallClockBreakdown = false;  // per-step forward / backward / reduce / step times
  bool dumpState = false;           // print the resolved engine state after initialization
  CommsLoggerConfig commsLogger;
  CsvMonitorConfig csvMonitor;   // DeepSpeed's csv_monitor block
  TensorBoardConfig tensorboard;  // DeepSpeed's tensorboard block
  FlopsProfilerConfig flopsProfiler;  // DeepSpeed's flops_profiler block (the GPT trainer's)
  AioConfig aio;                      // DeepSpeed's aio block (NVMe offload's I/O)
  AutotuningConfig autotuning;        // DeepSpeed's autotuning block (ds-launch --autotuning)
  // This project's key: which collectives backend the world group uses. "auto" (default): shared
  // memory on one host, hierarchical across hosts with equal ranks per host, else Gloo.
  CommBackend commBackend = CommBackend::Auto;
  // enabled: the batch is the elastic one for this world size (DeepSpeed section 15.2); the world
  // itself stays as launched (rescaling a running job is ds-launch's, not yet implemented).
  ElasticityConfig elasticity;
  std::string elasticityJson;  // the "elasticity" block as written (compact JSON), "" without one
  std::vector<KeyVerdict> keyEffects;  // what each key the config sets does here (config_policy.h)
  std::string configHash;              // FNV-1a of the config text, recorded in checkpoints
  std::vector<std::string> warnings;   // unknown keys etc., one message each, ready to print
};

// Parses `jsonText`; `source` names the file in messages (e.g. "configs/ds_config.json").
// worldSize is the data-parallel world size used for batch inference. replicaRanks: the ranks of
// one model replica (pipe x model of a 3D job, so the whole world is worldSize x replicaRanks);
// above 1, an elasticity block must say so in model_parallel_size and rescales in whole replicas.
// Throws ds::Error: "SOURCE: JSON.PATH: expected ..., got ...".
DeepSpeedConfig parseDeepSpeedConfig(std::string_view jsonText, int64_t worldSize,
                                     std::string_view source, int64_t replicaRanks = 1);

// Reads `path` and parses it; a missing or unreadable file is an error naming the path.
// The file's text, for shipping verbatim to workers; errors name the path.
std::string readDeepSpeedConfigText(const std::string& path);
DeepSpeedConfig loadDeepSpeedConfig(const std::string& path, int64_t worldSize);

// Only the "elasticity" block of a config (what ds-elastic reads); an error when it is missing.
ElasticityConfig readElasticityConfig(std::string_view jsonText, const std::string& source);

}  // namespace ds::runtime
