// Job arguments with CLI11: one App with a subcommand per built-in job over the option structs,
// so defaults, types and ranges live in one place. CLI11 is the costliest header here: only this
// file includes it.
#include "contract/job_args.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdlib>

#include "common/error.h"

namespace ds {
namespace {

// The collectives ds-comm-bench times (send, recv and barrier need a peer's part or move nothing).
constexpr CollectiveOp kBenchOps[] = {CollectiveOp::AllReduce, CollectiveOp::AllGather,
                                      CollectiveOp::ReduceScatter, CollectiveOp::Broadcast};

CollectiveOp parseBenchOp(const std::string& text) {
  for (CollectiveOp op : kBenchOps)
    if (text == collectiveOpName(op)) return op;
  throw Error("ds-comm-bench --op " + text +
              ": use all_reduce, all_gather, reduce_scatter or broadcast");
}

// A program's own --deepspeed_config / --config argument, if any: one value, since what follows
// it may be the program's positional arguments.
std::vector<std::string> programConfigPaths(const std::vector<std::string>& jobArgs) {
  for (size_t i = 1; i < jobArgs.size(); ++i)
    for (const std::string flag : {"--deepspeed_config", "--config"}) {
      if (jobArgs[i] == flag && i + 1 < jobArgs.size()) return {jobArgs[i + 1]};
      if (jobArgs[i].starts_with(flag + "=")) return {jobArgs[i].substr(flag.size() + 1)};
    }
  return {};
}

void addTrain(CLI::App& app, TrainOptions& o) {
  CLI::App* train = app.add_subcommand("train", "the built-in trainer");
  // Several values, as deepy.py takes NeoX's files: `--config a.yml b.yml` (up to the next option).
  train
      ->add_option("--config,--deepspeed_config", o.config,
                   "DeepSpeed JSON config, or NeoX config files (a.yml b.yml, or \"a.yml, b.yml\")")
      ->required();
  train->add_option("--steps", o.steps, "optimizer steps")->check(CLI::PositiveNumber);
  train->add_option("--seed", o.seed, "data and initialisation seed");
  train->add_flag("--print_param_hash", o.printParamHash, "a parameter hash line per step");
  train->add_option("--hang_at_step", o.hangAtStep, "fault injection: stop progressing here");
  train->add_option("--hang_rank", o.hangRank, "fault injection: the rank that hangs")
      ->check(CLI::NonNegativeNumber);
  train->add_option("--load_dir", o.loadDir, "resume from DIR/latest when it exists");
  train->add_option("--save_dir", o.saveDir, "save checkpoints here");
  train->add_option("--save_interval", o.saveInterval, "steps between checkpoints (0: at the end)")
      ->check(CLI::NonNegativeNumber);
  train->add_option("--device", o.device, "cpu or cuda (default: DS_ACCELERATOR, else cpu)");
}

void addCommBench(CLI::App& app, CommBenchOptions& o, std::string& op, std::string& dtype,
                  std::string& backend, std::string& minSize, std::string& maxSize) {
  CLI::App* bench = app.add_subcommand("ds-comm-bench", "the collectives benchmark");
  bench->add_option("--op", op, "all_reduce, all_gather, reduce_scatter or broadcast");
  bench->add_option("--dtype", dtype, "fp32, bf16 or fp16");
  bench->add_option("--backend", backend, "auto, shm, hierarchical or gloo");
  bench->add_option("--min", minSize, "smallest message (1K, 64M, ...)");
  bench->add_option("--max", maxSize, "largest message");
  bench->add_option("--iters", o.iters, "timed iterations per size")->check(CLI::PositiveNumber);
  bench->add_option("--warmup", o.warmup, "untimed iterations per size")
      ->check(CLI::NonNegativeNumber);
  bench->add_flag("--check", o.check, "verify every rank's result");
  bench->add_flag("--json", o.json, "one JSON object per size");
}

}  // namespace

uint64_t parseByteSize(const std::string& flag, const std::string& text, uint64_t max) {
  const std::string bad = flag + ": \"" + text + "\" is not a size (e.g. 1K, 64M, 1G, 2T)";
  if (text.empty() || text[0] < '0' || text[0] > '9') throw Error(bad);
  char* end = nullptr;
  errno = 0;
  const unsigned long long value = std::strtoull(text.c_str(), &end, 10);
  const std::string suffix = end;
  int shift = 0;
  if (suffix == "K" || suffix == "k")
    shift = 10;
  else if (suffix == "M" || suffix == "m")
    shift = 20;
  else if (suffix == "G" || suffix == "g")
    shift = 30;
  else if (suffix == "T" || suffix == "t")
    shift = 40;
  else if (!suffix.empty())
    throw Error(bad);
  if (errno == ERANGE || value > (max >> shift)) {
    const uint64_t tib = uint64_t{1} << 40;
    throw Error(flag + ": \"" + text + "\" is larger than " +
                (max % tib == 0 ? std::to_string(max / tib) + "T" : std::to_string(max) + " bytes"));
  }
  return value << shift;
}

DeviceKind trainingDevice(const TrainOptions& options) { return selectDevice(options.device); }

std::string deviceOrigin(const TrainOptions& options) {
  const DeviceKind device = trainingDevice(options);
  if (!options.device.empty()) return std::string("train --device ") + deviceKindName(device);
  if (std::getenv("DS_ACCELERATOR")) return std::string("DS_ACCELERATOR=") + deviceKindName(device);
  return "the default device";
}

JobSpec parseJobArgs(const std::vector<std::string>& jobArgs) {
  JobSpec spec;
  if (jobArgs.empty()) throw Error("no job given");
  const std::string& name = jobArgs[0];
  if (name != "train" && name != "barrier" && name != "ds-comm-bench") {
    spec.configPaths = programConfigPaths(jobArgs);
    return spec;
  }
  CLI::App app{"job"};
  app.require_subcommand(1, 1);
  addTrain(app, spec.train);
  app.add_subcommand("barrier", "join, one barrier, exit");
  std::string op = "all_reduce", dtype = "fp32", backend = "auto", minSize = "1K", maxSize = "64M";
  addCommBench(app, spec.bench, op, dtype, backend, minSize, maxSize);
  std::vector<std::string> reversed(jobArgs.rbegin(), jobArgs.rend());  // CLI11 pops from the back
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    throw Error(name + ": " + e.what());
  }
  if (name == "train") {
    spec.kind = JobKind::Train;
    spec.configPaths = spec.train.config;
    spec.train.stepsGiven = app.get_subcommand("train")->count("--steps") > 0;
    if (!spec.train.device.empty()) parseDevice(spec.train.device, "train --device");
  } else if (name == "barrier") {
    spec.kind = JobKind::Barrier;
  } else {
    spec.kind = JobKind::CommBench;
    CommBenchOptions& o = spec.bench;
    o.op = parseBenchOp(op);
    o.dtype = parseDType(dtype, "ds-comm-bench --dtype");
    o.backend = ds::parseCommBackend(backend, "ds-comm-bench --backend");
    o.minBytes = parseByteSize("ds-comm-bench --min", minSize);
    o.maxBytes = parseByteSize("ds-comm-bench --max", maxSize);
    if (o.minBytes < dtypeBytes(o.dtype) || o.maxBytes < o.minBytes)
      throw Error("ds-comm-bench: --min " + std::to_string(o.minBytes) + " / --max " +
                  std::to_string(o.maxBytes) + ": need one element <= min <= max bytes");
  }
  return spec;
}

}  // namespace ds
