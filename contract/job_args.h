// The job a ds-launch command line names, parsed once (with CLI11) by both sides: ds-launch reads
// the config path and step count for its plan and progress bar, ds-worker runs the job.
//   train --config FILE... [--steps N] [--seed N] [--print_param_hash] [--load_dir D]
//         [--save_dir D] [--save_interval N]                   the built-in trainer
//   barrier                                                    join, one barrier, exit
//   ds-comm-bench [--op OP] [--dtype T] [--min SIZE] [--max SIZE] [--iters N] [--warmup N]
//                 [--backend B] [--check] [--json]             the collectives benchmark
//   anything else                                              an external program
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/collective_op.h"
#include "common/comm_backend.h"
#include "common/device_kind.h"
#include "common/dtype.h"

namespace ds {

enum class JobKind { Train, Barrier, CommBench, Program };

struct TrainOptions {
  // --config / --deepspeed_config: the values up to the next option, each a file or a comma list
  // ("a.yml b.yml", "a.yml, b.yml"); read, merged and shipped to workers by the launcher.
  std::vector<std::string> config;
  int64_t steps = 200;
  bool stepsGiven = false;  // --steps was on the command line (a NeoX YAML sets train-iters)
  uint64_t seed = 1234;
  bool printParamHash = false;  // one "param_hash" line per step, for replica-consistency checks
  // Fault injection for stall detection: this rank stops making progress (but keeps
  // heartbeating) when it reaches this step.
  int64_t hangAtStep = -1;
  int hangRank = 0;
  // Checkpoints: resume from loadDir/latest when it exists; save to saveDir every saveInterval
  // steps (0: only at the end) under the tag "global_stepN", as DeepSpeed names them.
  std::string loadDir;
  std::string saveDir;
  int64_t saveInterval = 0;
  // --device cpu|cuda as given ("" when not: DeepSpeed's DS_ACCELERATOR, else the CPU).
  std::string device;
};

// The device the built-in trainers run a job on: --device, else DS_ACCELERATOR, else the CPU
// (ds::Error for a name that is neither). What a trainer cannot run there is refused by
// runtime::checkTrainingDevice.
DeviceKind trainingDevice(const TrainOptions& options);
// What chose it, for messages: "train --device", "DS_ACCELERATOR" or "the default device".
std::string deviceOrigin(const TrainOptions& options);

struct CommBenchOptions {
  // all_reduce, all_gather, reduce_scatter or broadcast (the collectives a bench times alone)
  CollectiveOp op = CollectiveOp::AllReduce;
  DType dtype = DType::F32;
  ds::CommBackend backend = ds::CommBackend::Auto;
  uint64_t minBytes = 1024;
  uint64_t maxBytes = uint64_t{64} << 20;
  int iters = 20;
  int warmup = 5;
  bool check = false;
  bool json = false;
};

struct JobSpec {
  JobKind kind = JobKind::Program;
  TrainOptions train;      // kind == Train
  CommBenchOptions bench;  // kind == CommBench
  // The config to validate and ship, as given (runtime::splitConfigPaths reads the comma lists):
  // train's --config values, or a program's --deepspeed_config / --config argument (DeepSpeed
  // scripts take it so); empty when none.
  std::vector<std::string> configPaths;
};

// jobArgs[0] names the job. Throws ds::Error naming the job and the argument on bad input.
JobSpec parseJobArgs(const std::vector<std::string>& jobArgs);

// "64M" -> 67108864 (K, M, G, T are powers of 1024), at most `max` bytes; throws ds::Error
// naming `flag` otherwise (the program and its flag, "ds-nvme-tune --io_size", or the file and
// key).
uint64_t parseByteSize(const std::string& flag, const std::string& text,
                       uint64_t max = uint64_t{1} << 40);

}  // namespace ds
