// One rank's engine construction measured in its own process: the peak resident memory it adds
// (VmHWM after, minus VmRSS before), its time, and the per-rank formula it must stay under. The
// rank's communicator refuses every collective, so a construction that still needed one (the
// all-reduce of a full fp32 copy it replaced) fails instead of being measured. Shared by
// bench_zero_init and test_partitioned_construction.cc; the caller gives each rank a fresh process.
#pragma once

#include <algorithm>
#include <chrono>
#include <fstream>
#include <string>

#include "common/error.h"
#include "runtime/comm/communicator.h"
#include "runtime/config/ds_config.h"
#include "runtime/engine/engine.h"
#include "runtime/offload/slot_swapper.h"
#include "runtime/optim/make_optimizer.h"
#include "runtime/config/model_state_estimate.h"
#include "runtime/zero/partition_layout.h"

namespace ds::bench {

// Rank `rank` of a world of `size` that has no peers: every collective is an error.
class NoCollectiveCommunicator : public runtime::Communicator {
 public:
  NoCollectiveCommunicator(int rank, int size) : rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backendName() const override { return "none (construction needs no collective)"; }

 protected:
  void doAllReduce(void*, size_t, DType, runtime::ReduceOp) override { refuse("all_reduce"); }
  void doAllGather(const void*, void*, size_t, DType) override { refuse("all_gather"); }
  void doReduceScatter(const void*, void*, size_t, DType, runtime::ReduceOp) override {
    refuse("reduce_scatter");
  }
  void doBroadcast(void*, size_t, DType, int) override { refuse("broadcast"); }
  void doSend(const void*, size_t, DType, int) override { refuse("send"); }
  void doRecv(void*, size_t, DType, int) override { refuse("recv"); }
  void doBarrier() override { refuse("barrier"); }

 private:
  [[noreturn]] void refuse(const char* op) const {
    throw Error("rank " + std::to_string(rank_) + ": engine construction called " + op +
                "; partitioned construction must need no collective");
  }
  int rank_, size_;
};

// A field of /proc/self/status in bytes ("VmRSS", "VmHWM"); 0 where it is missing.
inline double procStatusBytes(const std::string& field) {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind(field + ":", 0) == 0) return std::stod(line.substr(field.size() + 1)) * 1024.0;
  return 0;
}

// What one rank holds once its engine is built, by the ZeRO formulas (runtime/zero/
// model_state_estimate.h) on the rank's real shard (padding included), and the bounded working set
// construction may add on top.
struct ConstructionFormula {
  double kept = 0;         // working copy + gradients (stages 0-2) + resident master and state
  double slots = 0;        // offload_optimizer nvme: buffer_count slots of the largest sub-group
  double drawScratch = 0;  // 16-bit models: the fp32 scratch the initial values go through
  double total() const { return kept + slots + drawScratch; }
};

inline ConstructionFormula constructionFormula(const runtime::DeepSpeedConfig& config,
                                               const std::vector<runtime::ParamSpec>& specs,
                                               int rank, int world) {
  using namespace runtime;
  const int stage = config.zero.stage;
  const DType model = config.precision.modelDtype;
  const DType grad = config.precision.gradAccumDtype.value_or(model);
  const PartitionLayout layout(specs, world, rank);
  const PartitionLayout shard = stage == 0 ? PartitionLayout(specs, 1, 0) : layout;
  const double count = static_cast<double>(specs.back().offset + specs.back().numel);
  const double own = static_cast<double>(layout.shardSize());
  const double optimizerShard = static_cast<double>(shard.shardSize());
  const double stateBytes =
      optimizerStateBytesPerParameter(config.optimizer.value_or(OptimizerConfig{}));
  // A separate fp32 master: 16-bit models at every stage, fp32 ones at stages 1-2.
  const bool separateMaster = model != DType::F32 || stage == 1 || stage == 2;
  const double masterAndState = (separateMaster ? 4.0 : 0.0) + stateBytes;
  ConstructionFormula f;
  // Stage 3 zeroes its gradient shard without touching it: it costs nothing until the first
  // backward writes it.
  f.kept = dtypeBytes(model) * (stage == 3 ? own : count) +
           (stage == 3 ? 0.0 : dtypeBytes(grad) * (stage == 2 ? own : count));
  if (config.zero.offloadOptimizer.device == OffloadDevice::Nvme) {
    const auto limit = static_cast<size_t>(std::max<int64_t>(1, config.zero.subGroupSize));
    const auto runs = shard.tensorRuns(limit);
    size_t largest = 0;
    for (const auto& [t0, t1] : runs) largest = std::max(largest, shard.chunk(t0, t1));
    // A slot holds the largest group's arrays as SlotSwapper lays them out, in an AlignedBuffer
    // of whole 2 MiB huge pages (touched at once) from 2 MiB up.
    const size_t arrays = (separateMaster ? 1 : 0) + static_cast<size_t>(stateBytes / 4);
    size_t slot = SlotSwapper::groupBytes(std::vector<size_t>(arrays, largest * sizeof(float)));
    constexpr size_t kHuge = size_t{2} << 20;
    if (slot >= kHuge) slot = (slot + kHuge - 1) / kHuge * kHuge;
    f.slots = static_cast<double>(
                  std::min<size_t>(config.zero.offloadOptimizer.bufferCount, runs.size())) *
              static_cast<double>(slot);
  } else {
    f.kept += masterAndState * optimizerShard;
  }
  if (model != DType::F32) f.drawScratch = sizeof(float) * double(runtime::ZeroStage::kInitChunk);
  return f;
}

struct ConstructionPeak {
  double rssBefore = 0;  // bytes resident before the engine existed
  double added = 0;      // VmHWM after construction minus rssBefore: the most it ever added
  double seconds = 0;
};

// Builds rank `rank`'s engine of `model` in this process and measures it. Call it once per
// process: the peak is the process's.
inline ConstructionPeak measureConstruction(runtime::Model& model,
                                            const runtime::DeepSpeedConfig& config, int rank,
                                            int world, uint64_t seed) {
  NoCollectiveCommunicator comm(rank, world);
  ConstructionPeak peak;
  peak.rssBefore = procStatusBytes("VmRSS");
  const auto start = std::chrono::steady_clock::now();
  {
    runtime::Engine engine(model, config, comm, seed);
    peak.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    peak.added = procStatusBytes("VmHWM") - peak.rssBefore;
  }
  return peak;
}

}  // namespace ds::bench
