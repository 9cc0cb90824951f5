// ds-config memory: the per-rank model-state memory of every ZeRO stage for a parameter count and
// world size, with the config's precision, accumulation dtype and optimizer (what DeepSpeed's
// estimate_zero*_model_states_mem_needs print). The formulas are the engine's own allocations
// (runtime/config/model_state_estimate.h), checked against it in test_engine.cc.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"
#include "runtime/config/job_config.h"
#include "runtime/config/rank_peak_memory.h"
#include "runtime/model/gpt.h"
#include "runtime/optim/make_optimizer.h"
#include "runtime/config/model_state_estimate.h"
#include "tools/ds_config/commands.h"

namespace ds::tools {
namespace {

struct MemoryOptions {
  std::vector<std::string> config;  // files, or comma lists of them
  std::string params;
  int64_t worldSize = 1;
  bool json = false;
};

// "1300000000", "1.3e9", "1.3B", "350M", "7b".
double parseParameterCount(const std::string& text) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  double scale = 1;
  const std::string suffix = text.substr(used);
  if (suffix == "K" || suffix == "k")
    scale = 1e3;
  else if (suffix == "M" || suffix == "m")
    scale = 1e6;
  else if (suffix == "B" || suffix == "b" || suffix == "G")
    scale = 1e9;
  else if (!suffix.empty())
    used = 0;
  if (used == 0 || !(value > 0) || !std::isfinite(value))
    throw Error(
        "--params: expected a positive parameter count such as 1300000000, 1.3e9, 1.3B "
        "or 350M, got \"" +
        text + "\"");
  return std::round(value * scale);
}

std::string gib(double bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
  return text;
}

// The config's offload settings where the stage takes them (offload_optimizer from stage 1,
// offload_param at stage 3), as DeepSpeed's rules do.
runtime::RankPeakMemory peakAtStage(const runtime::DeepSpeedConfig& c,
                                    const runtime::ModelShape& shape, int world, int stage) {
  runtime::DeepSpeedConfig at = c;
  at.zero.stage = stage;
  if (stage == 0) at.zero.offloadOptimizer.device = runtime::OffloadDevice::None;
  if (stage != 3) at.zero.offloadParam.device = runtime::OffloadDevice::None;
  return runtime::estimateRankPeakMemory(at, shape, world);
}

void printPeak(const runtime::DeepSpeedConfig& c, const runtime::ModelShape& shape, int world) {
  const runtime::RankPeakMemory r = runtime::estimateRankPeakMemory(c, shape, world);
  constexpr double kMiB = 1024.0 * 1024.0;
  std::printf("Peak resident memory per rank at stage %d (predicted): %.1f MiB, at %s = process "
              "%.1f + resident states %.1f (parameters %.1f, gradients %.1f, master %.1f, "
              "optimizer %.1f, swap slots %.1f) + the largest of construction %.1f, training "
              "(buffers %.1f + activations %.1f) and the closing sample %.1f\n",
              c.zero.stage, r.peak() / kMiB, r.peakPhase().c_str(), r.baseline / kMiB,
              r.resident() / kMiB, r.parameters / kMiB, r.gradients / kMiB,
              r.masterWeights / kMiB, r.optimizerStates / kMiB, r.swapSlots / kMiB,
              r.construction / kMiB, r.buffers / kMiB, r.activations / kMiB,
              r.closingSample / kMiB);
}

// What every printed figure is computed from.
struct MemoryInputs {
  const runtime::DeepSpeedConfig& config;
  double params = 0;
  std::optional<runtime::ModelShape> shape;  // a NeoX YAML's GPT: what the peak RSS needs
  DType model = DType::F32;
  DType grads = DType::F32;
  double stateBytes = 0;  // optimizer state per parameter
  int world = 1;

  runtime::ModelStateEstimate atStage(int stage) const {
    return runtime::estimateModelState(stage, model, grads, params, world, stateBytes);
  }
};

// The parameter count: --params, else a NeoX YAML's GPT (byte-level vocabulary) gives its own.
void readModelSize(const runtime::JobConfig& job, const MemoryOptions& o, MemoryInputs& in) {
  const runtime::DeepSpeedConfig& c = job.deepspeed;
  if (job.gpt) {
    const runtime::GptConfig model =
        runtime::modelConfigFor(*job.gpt, *runtime::makeJobTokenizer(*job.gpt));
    in.shape = runtime::gptModelShape(model, static_cast<double>(c.batch.microBatchPerGpu));
    in.shape->parameters = static_cast<double>(runtime::Gpt(model).parameterCount());
  }
  if (!o.params.empty()) {
    in.params = parseParameterCount(o.params);
    if (in.shape) {  // a count of its own: no experts known among them
      in.shape->parameters = in.params;
      in.shape->expertParameters = 0;
    }
  } else if (in.shape) {
    in.params = in.shape->parameters;
  } else {
    throw ds::Error("--params: required with a DeepSpeed JSON config (a NeoX YAML config "
                    "gives its GPT's count)");
  }
}

void printJson(const MemoryInputs& in) {
  std::cout << "[";
  for (int stage = 0; stage <= 3; ++stage) {
    const auto e = in.atStage(stage);
    std::printf(
        "%s{\"stage\": %d, \"parameters\": %.0f, \"gradients\": %.0f, "
        "\"master_weights\": %.0f, \"optimizer_states\": %.0f, \"total\": %.0f",
        stage ? ", " : "", stage, e.parameters, e.gradients, e.masterWeights, e.optimizerStates,
        e.total());
    if (in.shape)  // with the config's offload settings, wherever that stage allows them
      std::printf(", \"peak_rss\": %.0f",
                  peakAtStage(in.config, *in.shape, in.world, stage).peak());
    std::printf("}");
    std::fflush(stdout);
  }
  std::cout << "]\n";
}

void printTable(const MemoryInputs& in, const MemoryOptions& o) {
  const runtime::DeepSpeedConfig& c = in.config;
  const std::string optimizer =
      c.optimizer ? runtime::optimizerTypeName(c.optimizer->type) : "Adam (default)";
  std::printf(
      "Model states per rank: %.4gB parameters on %d rank%s, %s model, %s gradients, %s "
      "(%.0f bytes/parameter of state). Activations and buffers not included here; a NeoX "
      "YAML's peak resident memory follows the table.\n",
      in.params / 1e9, in.world, in.world == 1 ? "" : "s", dtypeName(in.model),
      dtypeName(in.grads), optimizer.c_str(), in.stateBytes);
  std::printf("  %-7s %12s %12s %12s %12s %12s\n", "stage", "params", "gradients", "master",
              "optimizer", "total");
  for (int stage = 0; stage <= 3; ++stage) {
    const auto e = in.atStage(stage);
    std::printf("%s %-5d %12s %12s %12s %12s %12s\n", stage == c.zero.stage ? " *" : "  ", stage,
                gib(e.parameters).c_str(), gib(e.gradients).c_str(), gib(e.masterWeights).c_str(),
                gib(e.optimizerStates).c_str(), gib(e.total()).c_str());
  }
  std::printf("  (* = zero_optimization.stage of %s)\n",
              runtime::configPathsText(o.config).c_str());
}

// Where the master weights and optimizer states live with offload_optimizer.
void printOptimizerOffload(const MemoryInputs& in) {
  const runtime::DeepSpeedConfig& c = in.config;
  const auto& offload = c.zero.offloadOptimizer;
  const auto e = in.atStage(c.zero.stage);
  if (offload.device == runtime::OffloadDevice::Nvme) {
    // A step streams the sub-groups through buffer_count resident slots of one group each, or
    // fewer when there are fewer groups (a tensor bigger than sub_group_size is a group of its
    // own: then the slots are bigger).
    const double shard = c.zero.stage == 0 ? in.params : in.params / in.world;
    const double groupElements = std::min(static_cast<double>(c.zero.subGroupSize), shard);
    const double slotCount =
        std::min(static_cast<double>(offload.bufferCount), std::ceil(shard / groupElements));
    const double slots =
        slotCount * groupElements * runtime::swapSlotBytesPerElement(e, in.stateBytes);
    // With offload_param nvme the parameters are not resident either (their line follows).
    const bool paramsSwapped =
        c.zero.stage == 3 && c.zero.offloadParam.device == runtime::OffloadDevice::Nvme;
    std::printf("offload_optimizer nvme: at stage %d the master weights and optimizer states "
                "(%s per rank) live in a swap file in %s, %s of disk per rank; in memory: %s per "
                "rank%s, plus %.0f swap slot(s) (buffer_count) of one sub-group each: %s\n",
                c.zero.stage, gib(e.masterWeights + e.optimizerStates).c_str(),
                offload.nvmePath.c_str(), gib(e.masterWeights + e.optimizerStates).c_str(),
                gib(paramsSwapped ? e.gradients : e.parameters + e.gradients).c_str(),
                paramsSwapped ? " of gradients (the parameters: offload_param below)" : "",
                slotCount, gib(slots).c_str());
  }
  else if (offload.device == runtime::OffloadDevice::Cpu)
    std::printf("offload_optimizer cpu: the master weights and optimizer states live in CPU "
                "memory, as everything does in this CPU-only runtime\n");
}

void printParamOffload(const MemoryInputs& in) {
  const auto& param = in.config.zero.offloadParam;
  if (param.device == runtime::OffloadDevice::Nvme)
    std::printf("offload_param nvme: each rank's parameter shard (%s per rank) lives in a swap file "
                "in %s, except the first layers up to max_in_cpu = %lld elements; a layer's shard "
                "is in memory while it is gathered and while the optimizer step updates it\n",
                gib(in.atStage(in.config.zero.stage).parameters).c_str(), param.nvmePath.c_str(),
                static_cast<long long>(param.maxInCpu));
  else if (param.device == runtime::OffloadDevice::Cpu)
    std::printf("offload_param cpu: the parameters live in CPU memory, as everything does here\n");
}

void runMemory(const MemoryOptions& o) {
  const runtime::JobConfig job = runtime::parseJobConfig(
      runtime::readJobConfigText(o.config), o.worldSize, runtime::configPathsText(o.config));
  const runtime::DeepSpeedConfig& c = job.deepspeed;
  MemoryInputs in{c, 0, std::nullopt};
  readModelSize(job, o, in);
  for (const std::string& warning : c.warnings) std::cerr << "warning: " << warning << '\n';
  in.model = c.precision.modelDtype;
  in.grads = c.precision.gradAccumDtype.value_or(in.model);
  in.stateBytes =
      runtime::optimizerStateBytesPerParameter(c.optimizer.value_or(runtime::OptimizerConfig{}));
  in.world = static_cast<int>(o.worldSize);
  if (o.json) {
    printJson(in);
    return;
  }
  printTable(in, o);
  printOptimizerOffload(in);
  if (in.shape) printPeak(c, *in.shape, in.world);
  printParamOffload(in);
}

}  // namespace

void addMemoryCommand(CLI::App& app) {
  auto o = std::make_shared<MemoryOptions>();
  CLI::App* cmd = app.add_subcommand(
      "memory", "Per-rank model-state memory of ZeRO stages 0-3 for PARAMS parameters");
  cmd->add_option("config", o->config,
                  "DeepSpeed JSON config, or NeoX config files (a.yml b.yml, or \"a.yml, b.yml\")")
      ->required();
  cmd->add_option("--params", o->params,
                  "parameter count: 1300000000, 1.3e9, 1.3B, 350M (default for NeoX YAML: its "
                  "GPT's)");
  cmd->add_option("--world-size", o->worldSize, "data-parallel ranks")->check(CLI::PositiveNumber);
  cmd->add_flag("--json", o->json, "print a JSON array, one object per stage (bytes)");
  cmd->callback([o] { runMemory(*o); });
}

}  // namespace ds::tools
