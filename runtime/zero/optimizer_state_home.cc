// The two homes of the optimizer's sub-groups behind OptimizerStateHome: resident (nothing moves)
// and nvme (the SlotSwapper's file and slots). The swapping itself is the SlotSwapper's; this file
// only maps a group's master slice and state arrays onto its regions and back.
#include "runtime/zero/optimizer_state_home.h"

#include <algorithm>
#include <cstring>

#include "common/error.h"
#include "common/memory_budget.h"
#include "runtime/offload/slot_swapper.h"

namespace ds::runtime {
namespace {

// offload_optimizer none or cpu: the master in the stage, the states in the optimizers.
class ResidentStates : public OptimizerStateHome {
 public:
  void reserve(const std::vector<size_t>&, size_t) override {}
  void addGroup(float* masterSlice, size_t, Optimizer& optimizer,
                const std::function<void(float*)>& fillMaster) override {
    if (fillMaster && masterSlice != nullptr) fillMaster(masterSlice);
    optimizer.stateArrays();  // its zeros written now, at construction, not in the first step
  }
  float* acquire(size_t, float* masterSlice, Optimizer&) override { return masterSlice; }
  void release(size_t, Optimizer&) override {}
  void endStep() override {}
  bool streamsMaster() const override { return false; }
  void swapInAll() override {}
  void swapOutAll() override {}
  size_t fileBytes() const override { return 0; }
  Traffic traffic() const override { return {}; }
  std::string engineName() const override { return ""; }
  StateFootprint footprint(const ModelStateEstimate& e, double, size_t, size_t) const override {
    return {e.masterWeights + e.optimizerStates, "",
            "offload the optimizer state (zero_optimization.offload_optimizer: "
            "{\"device\": \"nvme\", \"nvme_path\": DIR}), use a higher ZeRO stage or more ranks, "
            "or raise the limit"};
  }
};

// offload_optimizer nvme: each group's regions (master slice first, where separate, then the
// state arrays) in the swap file, and in a slot while the step updates the group.
class NvmeStates : public OptimizerStateHome {
 public:
  NvmeStates(const AioConfig& aio, const OffloadOptimizerConfig& offload, int rank)
      : aio_(aio), offload_(offload), rank_(rank) {}

  void reserve(const std::vector<size_t>& groupElements, size_t regionsPerGroup) override {
    uint64_t bytes = 0;
    for (size_t elements : groupElements)
      bytes +=
          SlotSwapper::groupBytes(std::vector<size_t>(regionsPerGroup, elements * sizeof(float)));
    regionsPerGroup_ = regionsPerGroup;
    swapper_ =
        std::make_unique<SlotSwapper>(aio_, offload_.nvmePath, rank_, bytes, "offload_optimizer",
                                      "optimizer", static_cast<int>(offload_.bufferCount));
  }

  void addGroup(float* masterSlice, size_t elements, Optimizer& optimizer,
                const std::function<void(float*)>& fillMaster) override {
    if (!swapper_) throw Error("offload_optimizer: a sub-group added before reserve (a bug)");
    // The group is made in its slot and written out from there: the homes (the master slice, the
    // optimizer's own arrays) are touched only by checkpoints, so no rank ever holds more of the
    // master and state than its slots, not even at construction.
    const bool freshState = optimizer.stateIsFresh();
    std::vector<SwapRegion> regions;
    if (masterSlice != nullptr) regions.push_back({masterSlice, elements * sizeof(float)});
    for (const OptimizerStateArray& state : optimizer.adoptStateArrays())
      regions.push_back({state.data, state.count * sizeof(float)});
    if (regions.size() != regionsPerGroup_)
      throw Error("offload_optimizer: " + std::to_string(regions.size()) +
                  " arrays per sub-group, the swap file was sized for " +
                  std::to_string(regionsPerGroup_) + " (a bug)");
    withMaster_.push_back(masterSlice != nullptr);
    swapper_->addGroup(regions, [&](const std::vector<void*>& at) {
      for (size_t i = 0; i < regions.size(); ++i) {
        const bool master = masterSlice != nullptr && i == 0;
        if (master && fillMaster)
          fillMaster(static_cast<float*>(at[i]));
        else if (!master && freshState)
          std::memset(at[i], 0, regions[i].bytes);
        else
          std::memcpy(at[i], regions[i].data, regions[i].bytes);
      }
    });
  }

  float* acquire(size_t g, float* masterSlice, Optimizer& optimizer) override {
    const std::vector<void*>& at = swapper_->acquire(g);
    size_t next = 0;
    float* master = withMaster_[g] ? static_cast<float*>(at[next++]) : masterSlice;
    std::vector<float*> states;
    for (; next < at.size(); ++next) states.push_back(static_cast<float*>(at[next]));
    optimizer.bindState(states);
    return master;
  }

  void release(size_t g, Optimizer& optimizer) override {
    optimizer.unbindState();
    swapper_->release(g);
  }

  void endStep() override { swapper_->endStep(); }
  bool streamsMaster() const override { return true; }
  void swapInAll() override { swapper_->swapInAll(); }
  void swapOutAll() override { swapper_->swapOutAll(); }
  size_t fileBytes() const override { return swapper_ ? swapper_->fileBytes() : 0; }
  Traffic traffic() const override {
    if (!swapper_) return {};
    return {swapper_->bytesRead(), swapper_->bytesWritten()};
  }
  std::string engineName() const override { return swapper_ ? swapper_->engineName() : ""; }

  StateFootprint footprint(const ModelStateEstimate& e, double stateBytes, size_t groups,
                           size_t largestGroup) const override {
    // buffer_count slots (or one per sub-group, if fewer), each the largest sub-group's regions.
    const double slots =
        static_cast<double>(std::min<size_t>(static_cast<size_t>(offload_.bufferCount), groups)) *
        static_cast<double>(largestGroup) * swapSlotBytesPerElement(e, stateBytes);
    return {slots, ", the last two on NVMe through " + humanBytes(slots) + " of swap slots",
            "use a higher ZeRO stage or more ranks, a smaller sub_group_size or "
            "offload_optimizer.buffer_count, or raise the limit"};
  }

 private:
  const AioConfig aio_;
  const OffloadOptimizerConfig offload_;
  const int rank_;
  size_t regionsPerGroup_ = 0;
  std::vector<bool> withMaster_;  // per group: whether its first region is the master slice
  std::unique_ptr<SlotSwapper> swapper_;
};

}  // namespace

std::unique_ptr<OptimizerStateHome> OptimizerStateHome::make(const DeepSpeedConfig& config,
                                                             int rank) {
  const OffloadOptimizerConfig& offload = config.zero.offloadOptimizer;
  if (offload.device == OffloadDevice::Nvme)
    return std::make_unique<NvmeStates>(config.aio, offload, rank);
  return std::make_unique<ResidentStates>();
}

}  // namespace ds::runtime
