// Parses ds_config.json into DeepSpeedConfig. Every error names the file and the JSON path; keys
// DeepSpeed knows but we do not implement are ignored silently, unknown keys only warn (with a
// suggestion), as DeepSpeed itself ignores most unknown top-level keys.
#include "runtime/config/ds_config.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "runtime/common/error.h"
#include "runtime/config/closest_key.h"

namespace ds::runtime {
namespace {

// ordered_json keeps file order, so warnings come out in the order the user wrote the keys.
using Json = nlohmann::ordered_json;

// Key tables are packed by hand; clang-format would put each key on its own line.
// clang-format off
// Top-level keys of the DeepSpeed config reference plus other keys DeepSpeed's runtime reads
// (deepspeed/runtime/constants.py, config.py). Known-but-ignored keys are not warned about.
const std::vector<std::string_view> kTopLevelKeys = {
    "train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
    "optimizer", "scheduler", "communication_data_type", "seq_parallel_comm_data_type",
    "prescale_gradients", "gradient_predivide_factor", "sparse_gradients", "fp16", "bf16",
    "bfloat16", "amp", "gradient_clipping", "zero_optimization", "zero_allow_untested_optimizer",
    "zero_force_ds_cpu_optimizer", "aio", "steps_per_print", "wall_clock_breakdown",
    "memory_breakdown", "dump_state", "autotuning", "flops_profiler", "activation_checkpointing",
    "sparse_attention", "data_efficiency", "curriculum_learning", "tensorboard", "wandb",
    "csv_monitor", "elasticity", "comms_logger", "comm_backend", "compression_training", "checkpoint", "data_types",
    "disable_allgather", "vocabulary_size", "eigenvalue", "progressive_layer_drop",
    "dataloader_drop_last", "use_data_before_expert_parallelism", "graph_harvesting",
    "sequence_parallel_size", "pipeline", "hybrid_engine", "quantize_training", "nebula", "compile",
    "timers", "torch_autocast"};

// DeepSpeedZeroConfig fields and their pydantic aliases (both spellings are accepted there).
const std::vector<std::string_view> kZeroKeys = {
    "stage", "contiguous_gradients", "reduce_scatter", "reduce_bucket_size",
    "use_multi_rank_bucket_allreduce", "allgather_partitions", "allgather_bucket_size",
    "overlap_comm", "load_from_fp32_weights", "elastic_checkpoint", "offload_param",
    "offload_optimizer", "zenflow", "sub_group_size", "cpu_offload_param",
    "cpu_offload_use_pin_memory", "cpu_offload", "stage3_prefetch_bucket_size",
    "prefetch_bucket_size", "stage3_param_persistence_threshold", "param_persistence_threshold",
    "stage3_model_persistence_threshold", "model_persistence_threshold",
    "stage3_max_live_parameters", "max_live_parameters", "stage3_max_reuse_distance",
    "max_reuse_distance", "stage3_gather_16bit_weights_on_model_save",
    "gather_16bit_weights_on_model_save", "stage3_gather_fp16_weights_on_model_save",
    "stage3_module_granularity_threshold", "module_granularity_threshold",
    "stage3_use_all_reduce_for_fetch_params", "use_all_reduce_for_fetch_params",
    "stage3_allgather_sequential", "allgather_sequential", "stage3_partition_stream_chunk_size",
    "partition_stream_chunk_size", "ignore_unused_parameters", "legacy_stage1",
    "round_robin_gradients", "zero_hpz_partition_size", "zero_quantized_weights",
    "zero_quantized_nontrainable_weights", "zero_quantized_gradients", "zeropp_loco_param",
    "mics_shard_size", "mics_hierarchical_params_gather", "memory_efficient_linear",
    "pipeline_loading_checkpoint", "override_module_apply", "log_trace_cache_warnings",
    "enable_sanity_checks", "save_muon_momentum_buffer_in_memory", "leaf_module", "grad_hooks"};

// clang-format on

const std::vector<std::string_view> kOptimizerKeys = {"type", "params", "legacy_fusion"};
// FusedAdam's constructor arguments plus DeepSpeed's own torch_adam / adam_w_mode.
const std::vector<std::string_view> kAdamKeys = {
    "lr",         "betas",           "eps",     "weight_decay", "adam_w_mode",
    "torch_adam", "bias_correction", "amsgrad", "max_grad_norm"};
const std::vector<std::string_view> kSchedulerKeys = {"type", "params"};
const std::vector<std::string_view> kWarmupLrKeys = {
    "warmup_min_lr", "warmup_max_lr", "warmup_num_steps", "warmup_type", "last_batch_iteration"};

std::string join(const std::string& prefix, std::string_view key) {
  return prefix.empty() ? std::string(key) : prefix + "." + std::string(key);
}

// The value as JSON text, shortened so a huge array cannot flood the message.
std::string describe(const Json& v) {
  std::string text = v.dump();
  return text.size() > 60 ? text.substr(0, 57) + "..." : text;
}

// Typed accessors that turn every mismatch into "SOURCE: PATH: expected X, got Y".
class Reader {
 public:
  Reader(std::string_view source, std::vector<std::string>& warnings)
      : source_(source), warnings_(warnings) {}

  [[noreturn]] void fail(const std::string& path, const std::string& message) const {
    throw Error(source_ + ": " + path + ": " + message);
  }
  void warn(const std::string& message) { warnings_.push_back(source_ + ": " + message); }

  // DeepSpeed reads keys with dict.get, so an explicit null is the same as an absent key.
  static const Json* member(const Json& object, std::string_view key) {
    auto it = object.find(std::string(key));
    return (it == object.end() || it->is_null()) ? nullptr : &*it;
  }

  const Json& object(const Json& v, const std::string& path) const {
    if (!v.is_object()) fail(path, "expected an object, got " + describe(v));
    return v;
  }

  // nlohmann keeps booleans apart from numbers, so `true` is rejected here (Python would not).
  double number(const Json& v, const std::string& path) const {
    if (!v.is_number()) fail(path, "expected a number, got " + describe(v));
    return v.get<double>();
  }
  double nonNegative(const Json& v, const std::string& path) const {
    const double x = number(v, path);
    if (!(x >= 0.0)) fail(path, "expected a number >= 0, got " + describe(v));
    return x;
  }

  int64_t integer(const Json& v, const std::string& path) const {
    if (v.is_number_float()) {
      const double x = v.get<double>();
      std::string hint;
      // Range check first: casting an out-of-range double to int64_t is undefined.
      if (std::fabs(x) < 9.0e18 && x == std::trunc(x)) {
        hint = " (write " + std::to_string(static_cast<int64_t>(x)) +
               " without a decimal point or exponent)";
      }
      fail(path, "expected an integer, got " + describe(v) + hint);
    }
    if (!v.is_number_integer()) fail(path, "expected an integer, got " + describe(v));
    if (v.is_number_unsigned() &&
        v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      fail(path, "integer " + describe(v) + " is too large");
    }
    return v.get<int64_t>();
  }

  bool boolean(const Json& v, const std::string& path) const {
    if (!v.is_boolean()) fail(path, "expected true or false, got " + describe(v));
    return v.get<bool>();
  }

  std::string string(const Json& v, const std::string& path) const {
    if (!v.is_string()) fail(path, "expected a string, got " + describe(v));
    return v.get<std::string>();
  }

  // Optional fields: `out` keeps its default when the key is absent or null; path = prefix.key.
  void readNonNegative(const Json& obj, const std::string& prefix, std::string_view key,
                       double& out) const {
    if (const Json* v = member(obj, key)) out = nonNegative(*v, join(prefix, key));
  }
  void readInt(const Json& obj, const std::string& prefix, std::string_view key, int64_t& out,
               int64_t min) const {
    const Json* v = member(obj, key);
    if (!v) return;
    out = integer(*v, join(prefix, key));
    if (out < min) {
      fail(join(prefix, key),
           "expected an integer >= " + std::to_string(min) + ", got " + describe(*v));
    }
  }
  void readBool(const Json& obj, const std::string& prefix, std::string_view key, bool& out) const {
    if (const Json* v = member(obj, key)) out = boolean(*v, join(prefix, key));
  }

  void warnUnknownKeys(const Json& object, const std::string& prefix,
                       const std::vector<std::string_view>& known) {
    for (auto it = object.begin(); it != object.end(); ++it) {
      bool isKnown = false;
      for (std::string_view k : known) isKnown = isKnown || k == it.key();
      if (isKnown) continue;
      std::string message = "unknown key \"" + join(prefix, it.key()) + "\"";
      const std::string suggestion = closestKey(it.key(), known);
      if (!suggestion.empty()) message += " (did you mean \"" + join(prefix, suggestion) + "\"?)";
      warn(message);
    }
  }

 private:
  std::string source_;
  std::vector<std::string>& warnings_;
};

Json parseJson(std::string_view text, const std::string& source) {
  // DeepSpeed loads configs with a hook that refuses duplicate keys; nlohmann would keep one
  // silently, so track the keys seen in each open object.
  std::vector<std::set<std::string>> open;
  auto onEvent = [&](int, Json::parse_event_t event, Json& parsed) {
    if (event == Json::parse_event_t::object_start) open.emplace_back();
    if (event == Json::parse_event_t::object_end) open.pop_back();
    if (event == Json::parse_event_t::key &&
        !open.back().insert(parsed.get<std::string>()).second) {
      throw Error(source + ": duplicate key \"" + parsed.get<std::string>() +
                  "\" in a JSON object (DeepSpeed refuses duplicate keys)");
    }
    return true;
  };
  try {
    return Json::parse(text.begin(), text.end(), onEvent);
  } catch (const Json::parse_error& e) {
    throw Error(source + ": invalid JSON at byte " + std::to_string(e.byte) + ": " + e.what());
  }
}

OptimizerConfig parseOptimizer(Reader& r, const Json& block) {
  r.object(block, "optimizer");
  r.warnUnknownKeys(block, "optimizer", kOptimizerKeys);
  OptimizerConfig out;
  const Json* type = Reader::member(block, "type");
  if (!type) r.fail("optimizer.type", "missing (supported: \"Adam\", \"AdamW\")");
  std::string name = r.string(*type, "optimizer.type");
  std::string lowered = name;
  for (char& c : lowered) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  // DeepSpeed matches optimizer names case-insensitively.
  if (lowered == "adam") {
    out.type = OptimizerType::Adam;
  } else if (lowered == "adamw") {
    out.type = OptimizerType::AdamW;
  } else {
    r.fail("optimizer.type", "\"" + name + "\" is not supported (supported: \"Adam\", \"AdamW\")");
  }

  AdamParams& p = out.params;
  if (const Json* params = Reader::member(block, "params")) {
    r.object(*params, "optimizer.params");
    r.warnUnknownKeys(*params, "optimizer.params", kAdamKeys);
    if (Reader::member(*params, "max_grad_norm")) {
      r.fail("optimizer.params.max_grad_norm",
             "not supported as an optimizer parameter; use the top-level \"gradient_clipping\"");
    }
    r.readNonNegative(*params, "optimizer.params", "lr", p.lr);
    if (const Json* v = Reader::member(*params, "betas")) {
      if (!v->is_array() || v->size() != 2) {
        r.fail("optimizer.params.betas", "expected an array of 2 numbers, got " + describe(*v));
      }
      p.beta1 = r.number((*v)[0], "optimizer.params.betas[0]");
      p.beta2 = r.number((*v)[1], "optimizer.params.betas[1]");
      for (int i = 0; i < 2; ++i) {
        const double b = i == 0 ? p.beta1 : p.beta2;
        if (!(b >= 0.0 && b < 1.0)) {
          r.fail("optimizer.params.betas[" + std::to_string(i) + "]",
                 "expected a number in [0, 1), got " + describe((*v)[i]));
        }
      }
    }
    r.readNonNegative(*params, "optimizer.params", "eps", p.eps);
    r.readNonNegative(*params, "optimizer.params", "weight_decay", p.weightDecay);
    r.readBool(*params, "optimizer.params", "adam_w_mode", p.adamWMode);
    // torch_adam only picks DeepSpeed's implementation; the maths is the same, so it is ignored.
    bool torchAdam = false, biasCorrection = true, amsgrad = false;
    r.readBool(*params, "optimizer.params", "torch_adam", torchAdam);
    r.readBool(*params, "optimizer.params", "bias_correction", biasCorrection);
    r.readBool(*params, "optimizer.params", "amsgrad", amsgrad);
    if (!biasCorrection) {
      r.fail("optimizer.params.bias_correction", "false is not implemented yet; remove the key");
    }
    if (amsgrad) r.fail("optimizer.params.amsgrad", "true is not implemented yet; remove the key");
  }
  // DeepSpeed: adam_w_mode = (name == "adamw") or params.adam_w_mode.
  if (out.type == OptimizerType::AdamW) p.adamWMode = true;
  return out;
}

SchedulerConfig parseScheduler(Reader& r, const Json& block) {
  r.object(block, "scheduler");
  r.warnUnknownKeys(block, "scheduler", kSchedulerKeys);
  const Json* type = Reader::member(block, "type");
  if (!type) r.fail("scheduler.type", "missing (supported: \"WarmupLR\")");
  // DeepSpeed looks scheduler classes up by exact (case-sensitive) name.
  const std::string name = r.string(*type, "scheduler.type");
  if (name != "WarmupLR") {
    r.fail("scheduler.type", "\"" + name + "\" is not supported yet (supported: \"WarmupLR\")");
  }
  SchedulerConfig out;
  WarmupLrParams& p = out.warmupLr;
  const Json* params = Reader::member(block, "params");
  if (!params) return out;
  r.object(*params, "scheduler.params");
  r.warnUnknownKeys(*params, "scheduler.params", kWarmupLrKeys);
  r.readNonNegative(*params, "scheduler.params", "warmup_min_lr", p.warmupMinLr);
  r.readNonNegative(*params, "scheduler.params", "warmup_max_lr", p.warmupMaxLr);
  r.readInt(*params, "scheduler.params", "warmup_num_steps", p.warmupNumSteps, 0);
  if (const Json* v = Reader::member(*params, "warmup_type")) {
    const std::string t = r.string(*v, "scheduler.params.warmup_type");
    if (t == "log") {
      p.warmupType = WarmupType::Log;
    } else if (t == "linear") {
      p.warmupType = WarmupType::Linear;
    } else {
      r.fail("scheduler.params.warmup_type", "expected \"log\" or \"linear\", got " + describe(*v));
    }
  }
  int64_t lastBatchIteration = -1;  // only meaningful when resuming; validated, not used
  r.readInt(*params, "scheduler.params", "last_batch_iteration", lastBatchIteration, -1);
  return out;
}

int parseZeroStage(Reader& r, const Json& block) {
  // The deprecated form "zero_optimization": true means stage 1 (DeepSpeed's
  // read_zero_config_deprecated).
  if (block.is_boolean()) {
    r.warn("\"zero_optimization\": true/false is deprecated; write {\"stage\": N}");
    return block.get<bool>() ? 1 : 0;
  }
  r.object(block, "zero_optimization");
  r.warnUnknownKeys(block, "zero_optimization", kZeroKeys);
  const Json* v = Reader::member(block, "stage");
  if (!v) return 0;
  const int64_t stage = r.integer(*v, "zero_optimization.stage");
  if (stage == 2 || stage == 3) {
    r.fail("zero_optimization.stage", "stages 2 and 3 are not implemented yet; use 0 or 1");
  }
  if (stage != 0 && stage != 1) {
    r.fail("zero_optimization.stage", "expected 0..3, got " + std::to_string(stage));
  }
  return static_cast<int>(stage);
}

CommsLoggerConfig parseCommsLogger(Reader& r, const Json& block) {
  r.object(block, "comms_logger");
  r.warnUnknownKeys(block, "comms_logger", {"enabled", "verbose", "prof_all", "debug", "prof_ops"});
  CommsLoggerConfig c;
  r.readBool(block, "comms_logger", "enabled", c.enabled);
  r.readBool(block, "comms_logger", "verbose", c.verbose);
  r.readBool(block, "comms_logger", "prof_all", c.profAll);
  r.readBool(block, "comms_logger", "debug", c.debug);
  if (const Json* ops = Reader::member(block, "prof_ops")) {
    if (!ops->is_array())
      r.fail("comms_logger.prof_ops", "expected a list of op names, got " + describe(*ops));
    for (size_t i = 0; i < ops->size(); ++i)
      c.profOps.push_back(r.string((*ops)[i], "comms_logger.prof_ops[" + std::to_string(i) + "]"));
  }
  return c;
}

}  // namespace

DeepSpeedConfig parseDeepSpeedConfig(std::string_view jsonText, int64_t worldSize,
                                     std::string_view source) {
  const std::string src(source);
  const Json root = parseJson(jsonText, src);
  if (!root.is_object()) {
    throw Error(src + ": expected a JSON object at the top level, got " + describe(root));
  }
  DeepSpeedConfig cfg;
  Reader r(source, cfg.warnings);
  r.warnUnknownKeys(root, "", kTopLevelKeys);

  auto optionalInt = [&](std::string_view key) -> std::optional<int64_t> {
    const Json* v = Reader::member(root, key);
    return v ? std::optional<int64_t>(r.integer(*v, std::string(key))) : std::nullopt;
  };
  const auto train = optionalInt("train_batch_size");
  const auto micro = optionalInt("train_micro_batch_size_per_gpu");
  const auto gas = optionalInt("gradient_accumulation_steps");
  try {
    cfg.batch = inferBatchSizes(train, micro, gas, worldSize);
  } catch (const Error& e) {
    throw Error(src + ": " + e.what());
  }

  const Json* elastic = Reader::member(root, "elasticity");
  const Json* elasticOn =
      elastic && elastic->is_object() ? Reader::member(*elastic, "enabled") : nullptr;
  if (elasticOn && elasticOn->is_boolean() && elasticOn->get<bool>()) {
    r.warn(
        "elasticity.enabled is true, but elastic batch sizing is not applied here; the batch "
        "sizes come from train_batch_size / train_micro_batch_size_per_gpu / "
        "gradient_accumulation_steps");
  }
  if (const Json* v = Reader::member(root, "optimizer")) cfg.optimizer = parseOptimizer(r, *v);
  if (const Json* v = Reader::member(root, "scheduler")) cfg.scheduler = parseScheduler(r, *v);
  r.readNonNegative(root, "", "gradient_clipping", cfg.gradientClipping);
  // DeepSpeed takes global_steps % steps_per_print, so 0 would divide by zero.
  r.readInt(root, "", "steps_per_print", cfg.stepsPerPrint, 1);
  if (const Json* v = Reader::member(root, "zero_optimization"))
    cfg.zeroStage = parseZeroStage(r, *v);
  if (const Json* v = Reader::member(root, "comm_backend")) {
    cfg.commBackend = r.string(*v, "comm_backend");
    if (cfg.commBackend != "auto" && cfg.commBackend != "shm" &&
        cfg.commBackend != "hierarchical" && cfg.commBackend != "gloo")
      r.fail("comm_backend",
             "expected \"auto\", \"shm\", \"hierarchical\" or \"gloo\", got " + describe(*v));
  }
  if (const Json* v = Reader::member(root, "comms_logger"))
    cfg.commsLogger = parseCommsLogger(r, *v);
  return cfg;
}

std::string readDeepSpeedConfigText(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw Error(path + ": cannot read DeepSpeed config: is a directory");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open DeepSpeed config: " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw Error(path + ": cannot read DeepSpeed config: " + std::strerror(errno));
  return text.str();
}

DeepSpeedConfig loadDeepSpeedConfig(const std::string& path, int64_t worldSize) {
  return parseDeepSpeedConfig(readDeepSpeedConfigText(path), worldSize, path);
}

}  // namespace ds::runtime
