// The "zero_optimization" block: stage and the bucket / stage-3 knobs the engine honours, with
// DeepSpeed's defaults (DeepSpeedZeroConfig). JSON stays out of this header.
#pragma once

#include <cstdint>
#include <string>

namespace ds::runtime {

// zero_optimization.offload_optimizer: where the fp32 master weights and optimizer states of
// each rank's partition live. cpu is where they live anyway on this CPU-only runtime; nvme keeps
// them in a per-rank swap file and streams optimizer sub-groups through memory at each step.
enum class OffloadDevice { None, Cpu, Nvme };
struct OffloadOptimizerConfig {
  OffloadDevice device = OffloadDevice::None;
  std::string nvmePath;
  bool pinMemory = false;   // no effect here (no device to DMA to)
  int64_t bufferCount = 4;  // nvme: resident slots a step streams the sub-groups through (>= 1)
  bool fastInit = false;    // no effect here
  double ratio = 1.0;
};

// zero_optimization.offload_param (stage 3): where each rank's shard of the working parameters
// lives. cpu: where it lives anyway; nvme: in a per-rank swap file, each layer's shard read into
// one of buffer_count resident buffers ahead of its all-gather, written back after each step.
struct OffloadParamConfig {
  OffloadDevice device = OffloadDevice::None;
  std::string nvmePath;
  bool pinMemory = false;              // nvme: the buffers' pages locked (mlock)
  int64_t bufferCount = 5;             // nvme: resident buffers the layers' shards are read into
  int64_t bufferSize = 100'000'000;    // elements per buffer: the largest layer shard swapped
  int64_t maxInCpu = 1'000'000'000;    // elements kept in memory (first layers first)
};

struct ZeroConfig {
  int stage = 0;
  int64_t reduceBucketSize = 500'000'000;       // elements per gradient reduction
  int64_t allgatherBucketSize = 500'000'000;    // elements per parameter all-gather (stages 1, 2)
  bool allgatherPartitions = true;              // false: one broadcast per rank instead
  bool reduceScatter = true;                    // false: all_reduce buckets, keep own slice
  bool overlapComm = false;                     // collectives on their own thread during backward
  bool contiguousGradients = true;              // accepted: gradients are always contiguous here
  bool roundRobinGradients = false;             // accepted: only matters with CPU offload
  int64_t maxLiveParameters = 1'000'000'000;    // stage 3: gathered elements kept at most
  int64_t maxReuseDistance = 1'000'000'000;     // stage 3: keep if reused within this many elements
  int64_t prefetchBucketSize = 50'000'000;      // stage 3: elements gathered ahead
  int64_t paramPersistenceThreshold = 100'000;  // stage 3: smaller tensors stay whole everywhere
  int64_t subGroupSize = 1'000'000'000;         // elements per optimizer sub-step
  bool elasticCheckpoint = false;               // accepted: checkpoints always reshard here
  bool ignoreUnusedParameters = true;           // unused parameters get zero gradients
  OffloadOptimizerConfig offloadOptimizer;
  OffloadParamConfig offloadParam;
  // ZeRO++ (stage 3): qwZ's int8 weight gathers, qgZ's int4 two-hop gradient reduce-scatter,
  // hpZ's secondary weight partition over groups of this many consecutive data ranks (a node).
  bool quantizedWeights = false;    // zero_quantized_weights
  bool quantizedGradients = false;  // zero_quantized_gradients
  int64_t hpzPartitionSize = 1;     // zero_hpz_partition_size (1: off)
  bool zeroPlusPlus() const {
    return quantizedWeights || quantizedGradients || hpzPartitionSize > 1;
  }
};

}  // namespace ds::runtime
