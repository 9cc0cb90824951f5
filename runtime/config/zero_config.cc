// Parses "zero_optimization": the stage and every knob the engine honours; errors name the path.
#include "runtime/config/zero_config.h"

#include <utility>

#include "runtime/config/config_blocks.h"

namespace ds::runtime {
namespace {

const std::string kZero = "zero_optimization";

// Keys whose pydantic alias is the stage3_ spelling; DeepSpeed accepts both.
struct AliasedInt {
  std::string_view key, alias;
  int64_t ZeroConfig::*field;
};

const AliasedInt kAliasedInts[] = {
    {"stage3_max_live_parameters", "max_live_parameters", &ZeroConfig::maxLiveParameters},
    {"stage3_max_reuse_distance", "max_reuse_distance", &ZeroConfig::maxReuseDistance},
    {"stage3_prefetch_bucket_size", "prefetch_bucket_size", &ZeroConfig::prefetchBucketSize},
    {"stage3_param_persistence_threshold", "param_persistence_threshold",
     &ZeroConfig::paramPersistenceThreshold}};

const std::pair<std::string_view, bool ZeroConfig::*> kSwitches[] = {
    {"allgather_partitions", &ZeroConfig::allgatherPartitions},
    {"reduce_scatter", &ZeroConfig::reduceScatter},
    {"overlap_comm", &ZeroConfig::overlapComm},
    {"contiguous_gradients", &ZeroConfig::contiguousGradients},
    {"round_robin_gradients", &ZeroConfig::roundRobinGradients},
    {"elastic_checkpoint", &ZeroConfig::elasticCheckpoint},
    {"ignore_unused_parameters", &ZeroConfig::ignoreUnusedParameters}};

void readStage(JsonReader& r, const Json& block, ZeroConfig& z) {
  if (const Json* v = JsonReader::member(block, "stage")) {
    const int64_t stage = r.integer(*v, "zero_optimization.stage");
    if (stage < 0 || stage > 3)
      r.fail("zero_optimization.stage", "expected 0..3, got " + std::to_string(stage));
    z.stage = static_cast<int>(stage);
  }
}

// Bucket and stage-3 sizes, in elements.
void readSizes(JsonReader& r, const Json& block, ZeroConfig& z) {
  r.readInt(block, kZero, "reduce_bucket_size", z.reduceBucketSize, 1);
  r.readInt(block, kZero, "allgather_bucket_size", z.allgatherBucketSize, 1);
  r.readInt(block, kZero, "sub_group_size", z.subGroupSize, 1);
  for (const auto& a : kAliasedInts) {
    if (JsonReader::member(block, a.key) && JsonReader::member(block, a.alias))
      r.fail(joinPath(kZero, a.key),
             "given twice (also as \"" + std::string(a.alias) + "\"); keep one");
    r.readInt(block, kZero, a.key, z.*a.field, 0);
    r.readInt(block, kZero, a.alias, z.*a.field, 0);
  }
}

void readDevice(JsonReader& r, const Json& v, const std::string& o, OffloadDevice& device) {
  if (const Json* d = JsonReader::member(v, "device")) {
    const std::string name = r.string(*d, o + ".device");
    if (name == "none") device = OffloadDevice::None;
    else if (name == "cpu") device = OffloadDevice::Cpu;
    else if (name == "nvme") device = OffloadDevice::Nvme;
    else r.fail(o + ".device", "expected none, cpu or nvme, got \"" + name + "\"");
  }
}

void readNvmePath(JsonReader& r, const Json& v, const std::string& o, OffloadDevice device,
                  std::string& path) {
  if (const Json* p = JsonReader::member(v, "nvme_path")) path = r.string(*p, o + ".nvme_path");
  if (device == OffloadDevice::Nvme && path.empty())
    r.fail(o + ".nvme_path", "required with \"device\": \"nvme\" (a directory on the NVMe drive)");
}

// The keys both offload blocks share, read first in each.
template <class Offload>
void readDeviceAndBuffers(JsonReader& r, const Json& v, const std::string& o, Offload& c) {
  readDevice(r, v, o, c.device);
  r.readBool(v, o, "pin_memory", c.pinMemory);
  r.readInt(v, o, "buffer_count", c.bufferCount, 1);
}

void readOffloadOptimizer(JsonReader& r, const Json& block, ZeroConfig& z) {
  const Json* v = JsonReader::member(block, "offload_optimizer");
  if (!v || !v->is_object()) return;
  const std::string o = "zero_optimization.offload_optimizer";
  OffloadOptimizerConfig& c = z.offloadOptimizer;
  r.warnUnknownKeys(*v, o, {"device", "nvme_path", "pin_memory", "buffer_count", "fast_init",
                            "ratio", "pipeline_read", "pipeline_write", "pipeline"});
  readDeviceAndBuffers(r, *v, o, c);
  r.readBool(*v, o, "fast_init", c.fastInit);
  r.readNonNegative(*v, o, "ratio", c.ratio);
  if (c.device != OffloadDevice::None && z.stage < 1)
    r.fail(o, "optimizer offload needs ZeRO stage 1, 2 or 3 (DeepSpeed's rule); set "
              "zero_optimization.stage");
  readNvmePath(r, *v, o, c.device, c.nvmePath);
  if (c.ratio != 1.0)
    r.fail(o + ".ratio", "partial offload (ratio < 1) is not implemented; remove it or set 1");
}

// DeepSpeed's deprecated booleans: the cpu device of the offload blocks, where those are absent.
void readDeprecatedCpuOffload(JsonReader& r, const Json& block, ZeroConfig& z) {
  bool cpuOffload = false, cpuOffloadParam = false;
  r.readBool(block, kZero, "cpu_offload", cpuOffload);
  r.readBool(block, kZero, "cpu_offload_param", cpuOffloadParam);
  if (cpuOffload && z.offloadOptimizer.device == OffloadDevice::None) {
    if (z.stage < 1)
      r.fail(kZero + ".cpu_offload",
             "optimizer offload needs ZeRO stage 1, 2 or 3 (DeepSpeed's rule)");
    z.offloadOptimizer.device = OffloadDevice::Cpu;
  }
  if (cpuOffloadParam && z.offloadParam.device == OffloadDevice::None) {
    if (z.stage != 3)
      r.fail(kZero + ".cpu_offload_param",
             "parameter offload needs ZeRO stage 3 (DeepSpeed's rule)");
    z.offloadParam.device = OffloadDevice::Cpu;
  }
}

void readOffloadParam(JsonReader& r, const Json& block, ZeroConfig& z) {
  const Json* v = JsonReader::member(block, "offload_param");
  if (!v || !v->is_object()) return;
  const std::string o = "zero_optimization.offload_param";
  OffloadParamConfig& c = z.offloadParam;
  r.warnUnknownKeys(*v, o, {"device", "nvme_path", "pin_memory", "buffer_count", "buffer_size",
                            "max_in_cpu"});
  readDeviceAndBuffers(r, *v, o, c);
  r.readInt(*v, o, "buffer_size", c.bufferSize, 1);
  r.readInt(*v, o, "max_in_cpu", c.maxInCpu, 0);
  if (c.device != OffloadDevice::None && z.stage != 3)
    r.fail(o, "parameter offload needs ZeRO stage 3 (DeepSpeed's rule); set "
              "zero_optimization.stage to 3 or remove offload_param");
  readNvmePath(r, *v, o, c.device, c.nvmePath);
}

// ZeRO++'s keys. DeepSpeed reads them only in stage 3 and ignores them elsewhere; here a key
// that would change nothing is an error.
void readZeroPlusPlus(JsonReader& r, const Json& block, ZeroConfig& z) {
  r.readBool(block, kZero, "zero_quantized_weights", z.quantizedWeights);
  r.readBool(block, kZero, "zero_quantized_gradients", z.quantizedGradients);
  r.readInt(block, kZero, "zero_hpz_partition_size", z.hpzPartitionSize, 0);
  if (z.hpzPartitionSize == 0) z.hpzPartitionSize = 1;  // DeepSpeed's ge=0: 0 and 1 are off
  const char* key = z.quantizedWeights     ? "zero_quantized_weights"
                    : z.quantizedGradients ? "zero_quantized_gradients"
                                           : "zero_hpz_partition_size";
  if (z.zeroPlusPlus() && z.stage != 3)
    r.fail(joinPath(kZero, key),
           "ZeRO++ partitions parameters: it needs zero_optimization.stage 3 (DeepSpeed ignores "
           "it at stage " +
               std::to_string(z.stage) + "); set the stage or remove the key");
  if (z.quantizedGradients && !z.reduceScatter)
    r.fail(kZero + ".zero_quantized_gradients",
           "qgZ replaces the gradient reduce-scatter: it needs reduce_scatter true (DeepSpeed's "
           "rule)");
}

}  // namespace

ZeroConfig parseZeroConfig(JsonReader& r, const Json& block,
                           const std::vector<std::string_view>& knownKeys) {
  ZeroConfig z;
  // The deprecated form "zero_optimization": true means stage 1 (DeepSpeed's
  // read_zero_config_deprecated).
  if (block.is_boolean()) {
    r.warn("\"zero_optimization\": true/false is deprecated; write {\"stage\": N}");
    z.stage = block.get<bool>() ? 1 : 0;
    return z;
  }
  r.object(block, kZero);
  r.warnUnknownKeys(block, kZero, knownKeys);
  readStage(r, block, z);
  readSizes(r, block, z);
  for (const auto& [key, field] : kSwitches) r.readBool(block, kZero, key, z.*field);
  readOffloadOptimizer(r, block, z);
  readDeprecatedCpuOffload(r, block, z);
  readOffloadParam(r, block, z);
  readZeroPlusPlus(r, block, z);
  return z;
}

}  // namespace ds::runtime
