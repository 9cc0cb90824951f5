// The config policy table. Each rule: the key's path, its effect here, the type of its value (and
// of the fields of a block), what makes it "switched on", and a note: where it is honoured, why it
// has no effect, or (for features not implemented) what it is and how to switch it off.
// Honoured keys are type-checked by their block's own parser; the others here.
#include "runtime/config/config_policy.h"

#include <cmath>

#include "runtime/config/config_blocks.h"

namespace ds::runtime {
namespace {

enum class Kind { Any, Bool, Int, Number, String, Object, List };
// When a setting asks for something: the named field (or the value itself, "") is ...
enum class When { True, False, AboveZero, AboveOne, Present, DeviceSet, AnyEnabledInside };

struct Field {
  std::string_view name;
  Kind kind;
};
struct Trigger {
  std::string_view field;
  When when;
};
struct Rule {
  std::string_view path;
  KeyEffect effect;
  Kind kind;
  std::vector<Field> fields;
  std::vector<Trigger> triggers;
  std::string_view note;  // NotImplemented: "<what it is>; <how to switch it off>"
};

const KeyEffect H = KeyEffect::Honoured, N = KeyEffect::NoEffect, O = KeyEffect::Observer,
                X = KeyEffect::NotImplemented;
const std::vector<Trigger> kEnabled = {{"enabled", When::True}};
const std::vector<Trigger> kIfTrue = {{"", When::True}};

// clang-format off
const std::vector<Rule> kRules = {
  // Batch, optimizer, schedule, precision, ZeRO: parsed by their own block parsers.
  {"train_batch_size", H, Kind::Any, {}, {}, "batch inference (train = micro x accumulation x ranks)"},
  {"train_micro_batch_size_per_gpu", H, Kind::Any, {}, {}, "batch inference"},
  {"gradient_accumulation_steps", H, Kind::Any, {}, {}, "batch inference; the engine steps at accumulation boundaries"},
  {"optimizer", H, Kind::Any, {}, {}, "Adam, AdamW, Lamb, SGD (CPU-Adam kernels), OneBitAdam, ZeroOneAdam, OneBitLamb (ZeRO 0)"},
  {"scheduler", H, Kind::Any, {}, {}, "WarmupLR, WarmupDecayLR, WarmupCosineLR, OneCycle, LRRangeTest"},
  {"gradient_clipping", H, Kind::Any, {}, {}, "global norm over the shards"},
  {"fp16", H, Kind::Any, {}, {}, "fp16 working copy, fp32 master, dynamic or static loss scaling"},
  {"bf16", H, Kind::Any, {}, {}, "bf16 working copy, fp32 master"},
  {"bfloat16", H, Kind::Any, {}, {}, "old name of bf16"},
  {"amp", H, Kind::Any, {}, {}, "refused when enabled (Apex amp does not exist natively): use fp16 or bf16"},
  {"communication_data_type", H, Kind::Any, {}, {}, "dtype of gradient reductions"},
  {"fp32_allreduce", H, Kind::Any, {}, {}, "older form of communication_data_type: \"fp32\""},
  {"data_types", H, Kind::Any, {}, {}, "grad_accum_dtype"},
  {"prescale_gradients", H, Kind::Any, {}, {}, "gradients divided before the reduction"},
  {"gradient_predivide_factor", H, Kind::Any, {}, {}, "with prescale_gradients"},
  {"zero_optimization", H, Kind::Any, {}, {}, "stages 0-3, buckets, overlap_comm, stage-3 gather knobs"},
  {"steps_per_print", H, Kind::Any, {}, {}, "progress and timer lines"},
  {"wall_clock_breakdown", H, Kind::Any, {}, {}, "DeepSpeed's timer lines on rank 0: forward / backward / allreduce / step at steps_per_print, the ZeRO optimizer's (allgather, gradients, step, swaps) after every update"},
  {"dump_state", H, Kind::Any, {}, {}, "engine state printed at start"},
  {"comms_logger", H, Kind::Any, {}, {}, "per-op log and summary table"},
  {"comm_backend", H, Kind::Any, {}, {}, "this project's choice of collectives (auto, shm, hierarchical, gloo)"},
  {"elasticity", H, Kind::Any, {}, {}, "enabled: the batch is DeepSpeed's elastic batch for the world size (ds-elastic shows it); the world is fixed at launch"},
  {"timers", H, Kind::Object, {{"throughput", Kind::Object}}, {}, "samples/s is always reported"},
  {"autotuning", H, Kind::Any, {}, {}, "read by ds-launch --autotuning tune|run (ZeRO stage, micro-batch and, with fast: false, overlap, buckets, activation checkpointing and the GPT's layout); with metric_path set a trainer times the profile steps and writes DeepSpeed's metric file"},
  {"zero_force_ds_cpu_optimizer", H, Kind::Bool, {}, {}, "the CPU optimizer is always the native one"},

  // Keys that cannot change anything in this engine, type-checked.
  {"zero_allow_untested_optimizer", N, Kind::Bool, {}, {}, "every optimizer here works with every ZeRO stage"},
  {"seq_parallel_comm_data_type", N, Kind::String, {}, {}, "only used with sequence parallelism"},
  {"vocabulary_size", N, Kind::Int, {}, {}, "informational"},
  {"dataloader_drop_last", N, Kind::Bool, {}, {}, "the built-in job generates its batches; programs bring their own loader"},
  {"use_data_before_expert_parallelism", N, Kind::Bool, {}, {}, "only used with mixture of experts"},
  {"aio", H, Kind::Object, {{"block_size", Kind::Int}, {"queue_depth", Kind::Int}, {"thread_count", Kind::Int},
                          {"intra_op_parallelism", Kind::Int}, {"single_submit", Kind::Bool},
                          {"overlap_events", Kind::Bool}, {"use_gds", Kind::Bool}}, {},
   "the I/O engine of NVMe offload (block size, queue depth, threads; use_gds refused)"},
  {"zero_optimization.contiguous_gradients", N, Kind::Bool, {}, {}, "gradients are always contiguous here"},
  {"zero_optimization.elastic_checkpoint", N, Kind::Bool, {}, {}, "checkpoints always reshard here"},
  {"zero_optimization.round_robin_gradients", N, Kind::Bool, {}, {}, "only matters with CPU offload"},
  {"zero_optimization.use_multi_rank_bucket_allreduce", N, Kind::Bool, {}, {}, "buckets are reduce-scattered per layer run"},
  {"zero_optimization.stage3_module_granularity_threshold", N, Kind::Int, {}, {}, "stage 3 gathers whole layers"},
  {"zero_optimization.module_granularity_threshold", N, Kind::Int, {}, {}, "stage 3 gathers whole layers"},
  {"zero_optimization.stage3_allgather_sequential", N, Kind::Bool, {}, {}, "one all-gather per layer either way"},
  {"zero_optimization.allgather_sequential", N, Kind::Bool, {}, {}, "one all-gather per layer either way"},
  {"zero_optimization.stage3_partition_stream_chunk_size", N, Kind::Int, {}, {}, "no CUDA streams on CPU"},
  {"zero_optimization.partition_stream_chunk_size", N, Kind::Int, {}, {}, "no CUDA streams on CPU"},
  {"zero_optimization.memory_efficient_linear", N, Kind::Bool, {}, {}, "PyTorch module hook option"},
  {"zero_optimization.override_module_apply", N, Kind::Bool, {}, {}, "PyTorch module hook option"},
  {"zero_optimization.log_trace_cache_warnings", N, Kind::Bool, {}, {}, "PyTorch module trace option"},
  {"zero_optimization.enable_sanity_checks", N, Kind::Bool, {}, {}, "debug checks of PyTorch hooks"},
  {"zero_optimization.save_muon_momentum_buffer_in_memory", N, Kind::Bool, {}, {}, "no Muon optimizer here"},
  {"zero_optimization.leaf_module", N, Kind::Any, {}, {}, "PyTorch module option"},
  {"zero_optimization.grad_hooks", N, Kind::Bool, {}, {}, "PyTorch autograd option"},
  {"zero_optimization.stage3_model_persistence_threshold", N, Kind::Int, {}, {}, "persistence is decided per layer by the parameter threshold"},
  {"zero_optimization.model_persistence_threshold", N, Kind::Int, {}, {}, "persistence is decided per layer by the parameter threshold"},

  // Observers this build does not provide: a warning when switched on.
  {"memory_breakdown", O, Kind::Bool, {}, kIfTrue, "memory breakdown printing is not provided (heartbeats report each rank's resident memory)"},

  // Features not implemented: an error when switched on.

  {"flops_profiler", H, Kind::Any, {}, {}, "the GPT trainer prints DeepSpeed's profile at profile_step (per-module params, MACs, forward latency); the MLP trainer refuses it"},
  {"tensorboard", H, Kind::Any, {}, {}, "rank 0 writes OUTPUT_PATH/JOB_NAME/events.out.tfevents.* (train_loss, lr, loss_scale)"},
  {"wandb", X, Kind::Object, {{"enabled", Kind::Bool}, {"group", Kind::String}, {"team", Kind::String}, {"project", Kind::String}},
   kEnabled, "the Weights & Biases monitor is not implemented; set \"enabled\": false or remove the block"},
  {"csv_monitor", H, Kind::Any, {}, {}, "rank 0 writes OUTPUT_PATH/JOB_NAME/Train_Samples_*.csv (train_loss, lr, loss_scale)"},
  {"activation_checkpointing", X, Kind::Object,
   {{"partition_activations", Kind::Bool}, {"contiguous_memory_optimization", Kind::Bool}, {"cpu_checkpointing", Kind::Bool},
    {"number_checkpoints", Kind::Int}, {"synchronize_checkpoint_boundary", Kind::Bool}, {"profile", Kind::Bool}},
   {{"partition_activations", When::True}, {"contiguous_memory_optimization", When::True}, {"cpu_checkpointing", When::True},
    {"number_checkpoints", When::AboveZero}, {"synchronize_checkpoint_boundary", When::True}, {"profile", When::True}},
   "activation checkpointing is not implemented yet; remove the block or set its switches to false"},
  {"sparse_attention", X, Kind::Object, {{"mode", Kind::String}, {"block", Kind::Int}}, {{"", When::Present}},
   "sparse attention is not implemented; remove the block"},
  {"sparse_gradients", X, Kind::Bool, {}, kIfTrue, "sparse gradients are not implemented; set it to false or remove it"},
  {"compression_training", X, Kind::Object, {}, {{"", When::AnyEnabledInside}},
   "compression training is not implemented; set every \"enabled\" in the block to false or remove it"},
  {"data_efficiency", X, Kind::Object, {{"enabled", Kind::Bool}, {"seed", Kind::Int}}, kEnabled,
   "data efficiency (data sampling / routing) is not implemented; set \"enabled\": false or remove the block"},
  {"curriculum_learning", X, Kind::Object, {{"enabled", Kind::Bool}}, kEnabled,
   "curriculum learning is not implemented; set \"enabled\": false or remove the block"},
  {"checkpoint", X, Kind::Object, {{"tag_validation", Kind::String}, {"load_universal", Kind::Bool},
                                   {"use_node_local_storage", Kind::Bool}, {"parallel_write", Kind::Object}},
   {{"load_universal", When::True}, {"use_node_local_storage", When::True}},
   "universal checkpoints and node-local checkpoint storage are not implemented (tag_validation has no effect: every rank saves under the same tag by construction); set them to false"},
  {"eigenvalue", X, Kind::Object, {{"enabled", Kind::Bool}}, kEnabled, "eigenvalue computation is not implemented; set \"enabled\": false or remove the block"},
  {"progressive_layer_drop", X, Kind::Object, {{"enabled", Kind::Bool}, {"theta", Kind::Number}, {"gamma", Kind::Number}}, kEnabled,
   "progressive layer drop is not implemented; set \"enabled\": false or remove the block"},
  {"disable_allgather", X, Kind::Bool, {}, kIfTrue, "disable_allgather is not implemented; remove it"},
  {"graph_harvesting", X, Kind::Bool, {}, kIfTrue, "CUDA graph harvesting does not exist on CPU; set it to false or remove it"},
  {"sequence_parallel_size", X, Kind::Int, {}, {{"", When::AboveOne}}, "DeepSpeed-Ulysses is the GPT trainer's (a NeoX YAML's inline sequence_parallel_size); this job has no sequence to split: set it to 1 or remove it"},
  {"pipeline", X, Kind::Object, {{"activation_checkpoint_interval", Kind::Int}, {"seed_layers", Kind::Bool}}, {{"activation_checkpoint_interval", When::AboveZero}},
   "pipeline parallelism is not implemented; remove the block"},
  {"hybrid_engine", X, Kind::Object, {{"enabled", Kind::Bool}}, kEnabled, "the hybrid (RLHF) engine is not implemented; set \"enabled\": false or remove the block"},
  {"quantize_training", X, Kind::Object, {{"enabled", Kind::Bool}}, kEnabled, "quantized training is not implemented; set \"enabled\": false or remove the block"},
  {"nebula", X, Kind::Object, {{"enabled", Kind::Bool}}, kEnabled, "Nebula checkpointing is not implemented; set \"enabled\": false or remove the block"},
  {"compile", X, Kind::Object, {{"deepcompile", Kind::Bool}, {"disable", Kind::Bool}, {"backend", Kind::String}}, {{"deepcompile", When::True}},
   "DeepCompile is not implemented; set \"deepcompile\": false or remove it"},
  {"torch_autocast", X, Kind::Object, {{"enabled", Kind::Bool}, {"dtype", Kind::String}}, kEnabled,
   "torch autocast does not exist natively; use \"bf16\" or \"fp16\" instead"},
  {"fp16.auto_cast", X, Kind::Bool, {}, kIfTrue, "casting module inputs to fp16 is not implemented; set it to false"},
  {"fp16.fp16_master_weights_and_grads", X, Kind::Bool, {}, kIfTrue, "fp16 master weights are not implemented (the master copy is fp32); set it to false"},
  {"bf16.bf16_master_weights_and_grads", X, Kind::Bool, {}, kIfTrue, "bf16 master weights are not implemented (the master copy is fp32); set it to false"},
  {"bf16.bf16_optimizer_states", X, Kind::Bool, {}, kIfTrue, "bf16 optimizer states are not implemented (states are fp32); set it to false"},
  {"bf16.immediate_grad_update", N, Kind::Bool, {}, {}, "gradients are accumulated in grad_accum_dtype either way"},
  {"bf16.check_grad_overflow", X, Kind::Bool, {}, kIfTrue, "overflow checks in bf16 are not implemented; set it to false"},
  {"zero_optimization.offload_optimizer", H, Kind::Any, {}, {},
   "cpu: where the optimizer state lives anyway here; nvme: a per-rank swap file under nvme_path, each step streaming the sub-groups through buffer_count resident slots (aio block)"},
  {"zero_optimization.offload_param", H, Kind::Any, {}, {},
   "stage 3. cpu: where the parameters live anyway here; nvme: each rank's parameter shard in a swap file under nvme_path, read per layer before its all-gather (buffer_size: the largest layer shard allowed; max_in_cpu: elements kept in memory)"},
  {"zero_optimization.cpu_offload", H, Kind::Bool, {}, {}, "deprecated spelling of offload_optimizer {\"device\": \"cpu\"}"},
  {"zero_optimization.cpu_offload_param", H, Kind::Bool, {}, {}, "deprecated spelling of offload_param {\"device\": \"cpu\"}"},
  {"zero_optimization.cpu_offload_use_pin_memory", N, Kind::Bool, {}, {}, "only used with offload"},
  {"zero_optimization.zenflow", X, Kind::Any, {}, {{"", When::Present}}, "ZenFlow is not implemented; remove the key"},
  {"zero_optimization.load_from_fp32_weights", X, Kind::Bool, {}, {{"", When::False}},
   "loading 16-bit weights instead of the fp32 master is not implemented; set it to true or remove it"},
  {"zero_optimization.stage3_gather_16bit_weights_on_model_save", X, Kind::Bool, {}, kIfTrue,
   "saving consolidated 16-bit weights is not implemented; set it to false"},
  {"zero_optimization.gather_16bit_weights_on_model_save", X, Kind::Bool, {}, kIfTrue,
   "saving consolidated 16-bit weights is not implemented; set it to false"},
  {"zero_optimization.stage3_gather_fp16_weights_on_model_save", X, Kind::Bool, {}, kIfTrue,
   "saving consolidated 16-bit weights is not implemented; set it to false"},
  {"zero_optimization.stage3_use_all_reduce_for_fetch_params", X, Kind::Bool, {}, kIfTrue,
   "fetching parameters by all-reduce is not implemented; set it to false"},
  {"zero_optimization.use_all_reduce_for_fetch_params", X, Kind::Bool, {}, kIfTrue,
   "fetching parameters by all-reduce is not implemented; set it to false"},
  {"zero_optimization.legacy_stage1", X, Kind::Bool, {}, kIfTrue, "the legacy stage 1 is not implemented; set it to false"},
  {"zero_optimization.zero_hpz_partition_size", H, Kind::Any, {}, {}, "ZeRO++ hpZ: a secondary weight partition within each node (stage 3)"},
  {"zero_optimization.zero_quantized_weights", H, Kind::Any, {}, {}, "ZeRO++ qwZ: int8 weight all-gathers (stage 3)"},
  {"zero_optimization.zero_quantized_nontrainable_weights", X, Kind::Bool, {}, kIfTrue, "int8 storage of non-trainable weights is not implemented (the built-in models train every weight); set it to false"},
  {"zero_optimization.zero_quantized_gradients", H, Kind::Any, {}, {}, "ZeRO++ qgZ: int4 two-hop gradient reduce-scatter (stage 3)"},
  {"zero_optimization.zeropp_loco_param", X, Kind::Any, {}, {{"", When::Present}}, "LoCo error feedback is not implemented; remove the key"},
  {"zero_optimization.mics_shard_size", X, Kind::Int, {}, {{"", When::AboveZero}}, "MiCS sharding is not implemented; set it to -1 or remove it"},
  {"zero_optimization.mics_hierarchical_params_gather", X, Kind::Bool, {}, kIfTrue, "MiCS is not implemented; set it to false"},
  {"zero_optimization.pipeline_loading_checkpoint", X, Kind::Bool, {}, kIfTrue, "pipelined checkpoint loading is not implemented; set it to false"},
};
// clang-format on

bool hasKind(const Json& v, Kind kind) {
  switch (kind) {
    case Kind::Any:
      return true;
    case Kind::Bool:
      return v.is_boolean();
    case Kind::Int:
      return v.is_number_integer() || (v.is_number_float() && std::fabs(v.get<double>()) < 9.0e18 &&
                                       v.get<double>() == std::trunc(v.get<double>()));
    case Kind::Number:
      return v.is_number();
    case Kind::String:
      return v.is_string();
    case Kind::Object:
      return v.is_object();
    case Kind::List:
      return v.is_array();
  }
  return false;
}

const char* kindName(Kind kind) {
  switch (kind) {
    case Kind::Any:
      return "a value";
    case Kind::Bool:
      return "true or false";
    case Kind::Int:
      return "an integer";
    case Kind::Number:
      return "a number";
    case Kind::String:
      return "a string";
    case Kind::Object:
      return "an object";
    case Kind::List:
      return "a list";
  }
  return "?";
}

bool anyEnabledInside(const Json& v, int depth = 0) {
  if (depth > 32) return false;
  if (v.is_object())
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (it.key() == "enabled" && it->is_boolean() && it->get<bool>()) return true;
      if (anyEnabledInside(*it, depth + 1)) return true;
    }
  if (v.is_array())
    for (const Json& item : v)
      if (anyEnabledInside(item, depth + 1)) return true;
  return false;
}

bool fires(const Json* v, When when) {
  if (v == nullptr) return false;
  switch (when) {
    case When::True:
      return v->is_boolean() && v->get<bool>();
    case When::False:
      return v->is_boolean() && !v->get<bool>();
    case When::AboveZero:
      return v->is_number() && v->get<double>() > 0;
    case When::AboveOne:
      return v->is_number() && v->get<double>() > 1;
    case When::Present:
      return true;
    case When::DeviceSet: {
      // {"device": "none"} or {} is DeepSpeed's "no offload"; true is the deprecated form.
      if (v->is_boolean()) return v->get<bool>();
      const Json* device = v->is_object() ? JsonReader::member(*v, "device") : nullptr;
      return device && device->is_string() && *device != "none";
    }
    case When::AnyEnabledInside:
      return anyEnabledInside(*v);
  }
  return false;
}

// The value at a dotted path ("zero_optimization.stage"), or nullptr (absent or null).
const Json* lookup(const Json& root, std::string_view path) {
  const Json* at = &root;
  while (at != nullptr) {
    const size_t dot = path.find('.');
    if (!at->is_object()) return nullptr;
    at = JsonReader::member(*at, path.substr(0, dot));
    if (dot == std::string_view::npos) return at;
    path.remove_prefix(dot + 1);
  }
  return nullptr;
}

}  // namespace

const char* keyEffectName(KeyEffect effect) {
  switch (effect) {
    case KeyEffect::Honoured:
      return "honoured";
    case KeyEffect::NoEffect:
      return "no effect here";
    case KeyEffect::Observer:
      return "not provided (warning)";
    case KeyEffect::NotImplemented:
      return "not implemented";
  }
  return "?";
}

std::vector<KeyVerdict> configPolicyTable() {
  std::vector<KeyVerdict> table;
  for (const Rule& rule : kRules)
    table.push_back({std::string(rule.path), rule.effect, false, std::string(rule.note)});
  return table;
}

std::vector<KeyVerdict> applyConfigPolicy(JsonReader& r, const Json& root) {
  std::vector<KeyVerdict> verdicts;
  for (const Rule& rule : kRules) {
    const Json* v = lookup(root, rule.path);
    if (v == nullptr) continue;
    const std::string path(rule.path);
    if (!hasKind(*v, rule.kind))
      r.fail(path, "expected " + std::string(kindName(rule.kind)) + ", got " + describeJson(*v));
    for (const Field& field : rule.fields)
      if (const Json* f = JsonReader::member(*v, field.name); f && !hasKind(*f, field.kind))
        r.fail(joinPath(path, field.name),
               "expected " + std::string(kindName(field.kind)) + ", got " + describeJson(*f));
    bool active = false;
    for (const Trigger& trigger : rule.triggers)
      active = active || fires(trigger.field.empty() ? v : JsonReader::member(*v, trigger.field),
                               trigger.when);
    if (active && rule.effect == KeyEffect::NotImplemented) r.fail(path, std::string(rule.note));
    if (active && rule.effect == KeyEffect::Observer) r.warn(path + ": " + std::string(rule.note));
    verdicts.push_back({path, rule.effect, active, std::string(rule.note)});
  }
  return verdicts;
}

}  // namespace ds::runtime
