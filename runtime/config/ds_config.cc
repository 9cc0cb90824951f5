// Parses ds_config.json into DeepSpeedConfig. Every error names the file and the JSON path; keys
// DeepSpeed knows but this engine does not implement go through the policy table (an error when
// switched on), unknown keys only warn (with a suggestion), as DeepSpeed ignores unknown keys.
#include "runtime/config/ds_config.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/error.h"
#include "common/fnv1a.h"
#include "common/files.h"
#include "common/json_text.h"
#include "runtime/config/config_blocks.h"
#include "runtime/elastic/elastic_batch.h"

namespace ds::runtime {
namespace {

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
    "timers", "torch_autocast", "fp32_allreduce"};

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

// FusedAdam's constructor arguments plus DeepSpeed's own torch_adam / adam_w_mode.

// Far larger than any real config; /dev/zero or a log file given by mistake stops here.
constexpr size_t kMaxConfigBytes = size_t{16} << 20;

CommsLoggerConfig parseCommsLogger(JsonReader& r, const Json& block) {
  r.object(block, "comms_logger");
  r.warnUnknownKeys(block, "comms_logger", {"enabled", "verbose", "prof_all", "debug", "prof_ops"});
  CommsLoggerConfig c;
  r.readBool(block, "comms_logger", "enabled", c.enabled);
  r.readBool(block, "comms_logger", "verbose", c.verbose);
  r.readBool(block, "comms_logger", "prof_all", c.profAll);
  r.readBool(block, "comms_logger", "debug", c.debug);
  if (const Json* ops = JsonReader::member(block, "prof_ops")) {
    if (!ops->is_array())
      r.fail("comms_logger.prof_ops", "expected a list of op names, got " + describeJson(*ops));
    for (size_t i = 0; i < ops->size(); ++i)
      c.profOps.push_back(r.string((*ops)[i], "comms_logger.prof_ops[" + std::to_string(i) + "]"));
  }
  return c;
}

// The batch trio, or with an enabled elasticity block the elastic batch for this world size.
void readBatch(JsonReader& r, const Json& root, int64_t worldSize, int64_t replicaRanks,
               const std::string& src, DeepSpeedConfig& cfg) {
  auto optionalInt = [&](std::string_view key) -> std::optional<int64_t> {
    const Json* v = JsonReader::member(root, key);
    return v ? std::optional<int64_t>(r.integer(*v, std::string(key))) : std::nullopt;
  };
  const auto train = optionalInt("train_batch_size");
  const auto micro = optionalInt("train_micro_batch_size_per_gpu");
  const auto gas = optionalInt("gradient_accumulation_steps");
  if (const Json* v = JsonReader::member(root, "elasticity")) {
    cfg.elasticity = parseElasticityConfig(r, *v);
    cfg.elasticityJson = v->dump();
  }
  if (cfg.elasticity.enabled) {
    // DeepSpeed's elastic override (section 15.2): the elastic batch for this world size
    // replaces the batch keys, which are an error unless ignore_non_elastic_batch_info.
    if ((train || micro || gas) && !cfg.elasticity.ignoreNonElasticBatchInfo)
      r.fail("elasticity",
             "train_batch_size, train_micro_batch_size_per_gpu and/or "
             "gradient_accumulation_steps are set, but elastic training computes them; remove "
             "them or set \"ignore_non_elastic_batch_info\": true in the elasticity block");
    if (replicaRanks > 1 && cfg.elasticity.modelParallelSize != replicaRanks)
      r.fail("elasticity.model_parallel_size",
             "this job's model replica is " + std::to_string(replicaRanks) +
                 " ranks (pipe-parallel-size x model-parallel-size), but the elasticity block "
                 "says " + std::to_string(cfg.elasticity.modelParallelSize) + "; set it to " +
                 std::to_string(replicaRanks) + " (and num_gpus_per_node to a multiple of it)");
  }
  // r.fail names the source itself; the batch arithmetic's messages get it here.
  try {
    if (cfg.elasticity.enabled) {
      const ElasticBatch e =
          replicaRanks > 1 ? elasticReplicaBatch(cfg.elasticity, worldSize * replicaRanks)
                           : computeElasticBatch(cfg.elasticity, worldSize, nullptr);
      cfg.batch = inferBatchSizes(e.finalBatchSize, e.microBatchSize,
                                  e.gradientAccumulationSteps, worldSize);
    } else {
      cfg.batch = inferBatchSizes(train, micro, gas, worldSize);
    }
  } catch (const Error& e) {
    throw Error(src + ": " + e.what());
  }
}

void readCommBackend(JsonReader& r, const Json& root, DeepSpeedConfig& cfg) {
  if (const Json* v = JsonReader::member(root, "comm_backend")) {
    try {
      cfg.commBackend = parseCommBackend(r.string(*v, "comm_backend"), "comm_backend");
    } catch (const Error&) {
      r.fail("comm_backend",
             "expected \"auto\", \"shm\", \"hierarchical\" or \"gloo\", got " + describeJson(*v));
    }
  }
}

// The monitors' blocks share DeepSpeed's keys: enabled, output_path, job_name.
void readMonitor(JsonReader& r, const Json& root, const char* block, bool& enabled,
                 std::string& outputPath, std::string& jobName) {
  const Json* v = JsonReader::member(root, block);
  if (!v) return;
  r.object(*v, block);
  r.warnUnknownKeys(*v, block, {"enabled", "output_path", "job_name"});
  r.readBool(*v, block, "enabled", enabled);
  if (const Json* path = JsonReader::member(*v, "output_path"))
    outputPath = r.string(*path, std::string(block) + ".output_path");
  if (const Json* name = JsonReader::member(*v, "job_name"))
    jobName = r.string(*name, std::string(block) + ".job_name");
  if (jobName.empty() || jobName.find('/') != std::string::npos)
    r.fail(std::string(block) + ".job_name", "expected a directory name (not empty, no '/')");
}

void readAio(JsonReader& r, const Json& root, const std::string& src, AioConfig& aio) {
  const Json* v = JsonReader::member(root, "aio");
  if (!v) return;
  r.object(*v, "aio");
  r.readInt(*v, "aio", "block_size", aio.blockSize, 1);
  r.readInt(*v, "aio", "queue_depth", aio.queueDepth, 1);
  r.readInt(*v, "aio", "thread_count", aio.threadCount, 1);
  r.readInt(*v, "aio", "intra_op_parallelism", aio.threadCount, 1);
  r.readBool(*v, "aio", "single_submit", aio.singleSubmit);
  r.readBool(*v, "aio", "overlap_events", aio.overlapEvents);
  r.readBool(*v, "aio", "use_gds", aio.useGds);
  try {
    aio.validate();
  } catch (const Error& e) {
    throw Error(src + ": " + e.what());
  }
}

void readFlopsProfiler(JsonReader& r, const Json& root, FlopsProfilerConfig& f) {
  const Json* v = JsonReader::member(root, "flops_profiler");
  if (!v) return;
  const char* block = "flops_profiler";
  r.object(*v, block);
  r.warnUnknownKeys(*v, block, {"enabled", "profile_step", "module_depth", "top_modules",
                                "detailed", "output_file"});
  r.readBool(*v, block, "enabled", f.enabled);
  r.readInt(*v, block, "profile_step", f.profileStep, 1);
  r.readInt(*v, block, "module_depth", f.moduleDepth, -1);
  r.readInt(*v, block, "top_modules", f.topModules, 1);
  r.readBool(*v, block, "detailed", f.detailed);
  if (const Json* file = JsonReader::member(*v, "output_file"); file && !file->is_null())
    f.outputFile = r.string(*file, "flops_profiler.output_file");
}

}  // namespace

DeepSpeedConfig parseDeepSpeedConfig(std::string_view jsonText, int64_t worldSize,
                                     std::string_view source, int64_t replicaRanks) {
  const std::string src(source);
  // DeepSpeed loads configs with a hook that refuses duplicate keys (the default rules).
  const Json root = parseOrderedJsonText(jsonText, src);
  if (!root.is_object()) {
    throw Error(src + ": expected a JSON object at the top level, got " + describeJson(root));
  }
  DeepSpeedConfig cfg;
  JsonReader r(source, cfg.warnings);
  // The hash of the text as given (dump() would recurse over the whole document).
  cfg.configHash = hex64(fnv1a64(jsonText.data(), jsonText.size()));
  r.warnUnknownKeys(root, "", kTopLevelKeys);
  readBatch(r, root, worldSize, replicaRanks, src, cfg);

  cfg.keyEffects = applyConfigPolicy(r, root);
  if (const Json* v = JsonReader::member(root, "optimizer"))
    cfg.optimizer = parseOptimizerConfig(r, *v);
  if (const Json* v = JsonReader::member(root, "scheduler"))
    cfg.scheduler = parseSchedulerConfig(r, *v);
  r.readNonNegative(root, "", "gradient_clipping", cfg.gradientClipping);
  // DeepSpeed takes global_steps % steps_per_print, so 0 would divide by zero.
  r.readInt(root, "", "steps_per_print", cfg.stepsPerPrint, 1);
  if (const Json* v = JsonReader::member(root, "zero_optimization"))
    cfg.zero = parseZeroConfig(r, *v, kZeroKeys);
  cfg.precision = parsePrecisionConfig(r, root, cfg.zero.stage);
  if (cfg.optimizer) checkOneBitLayout(*cfg.optimizer, cfg.zero.stage, 1, 1, false);
  if (cfg.zero.hpzPartitionSize > 1 && worldSize % cfg.zero.hpzPartitionSize != 0)
    r.fail("zero_optimization.zero_hpz_partition_size",
           std::to_string(cfg.zero.hpzPartitionSize) + " does not divide the " +
               std::to_string(worldSize) +
               " data-parallel ranks; set it to the ranks per node (DeepSpeed's rule)");
  r.readBool(root, "", "wall_clock_breakdown", cfg.wallClockBreakdown);
  r.readBool(root, "", "dump_state", cfg.dumpState);
  readCommBackend(r, root, cfg);
  if (const Json* v = JsonReader::member(root, "comms_logger"))
    cfg.commsLogger = parseCommsLogger(r, *v);
  readMonitor(r, root, "csv_monitor", cfg.csvMonitor.enabled, cfg.csvMonitor.outputPath,
              cfg.csvMonitor.jobName);
  readMonitor(r, root, "tensorboard", cfg.tensorboard.enabled, cfg.tensorboard.outputPath,
              cfg.tensorboard.jobName);
  readAio(r, root, src, cfg.aio);
  readFlopsProfiler(r, root, cfg.flopsProfiler);
  if (const Json* v = JsonReader::member(root, "autotuning"))
    cfg.autotuning = parseAutotuningConfig(r, *v);
  return cfg;
}

std::string readDeepSpeedConfigText(const std::string& path) {
  return readWholeFile(path, "DeepSpeed config", kMaxConfigBytes);
}

DeepSpeedConfig loadDeepSpeedConfig(const std::string& path, int64_t worldSize) {
  return parseDeepSpeedConfig(readDeepSpeedConfigText(path), worldSize, path);
}

ElasticityConfig readElasticityConfig(std::string_view jsonText, const std::string& source) {
  const Json root = parseOrderedJsonText(jsonText, source);
  if (!root.is_object())
    throw Error(source + ": expected a JSON object at the top level, got " + describeJson(root));
  const Json* block = JsonReader::member(root, "elasticity");
  if (!block)
    throw Error(source + ": 'elasticity' is missing from config json, please add it if running an "
                         "elastic training job.");
  std::vector<std::string> warnings;
  JsonReader r(source, warnings);
  return parseElasticityConfig(r, *block);
}

}  // namespace ds::runtime
