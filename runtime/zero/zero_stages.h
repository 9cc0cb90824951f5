// The four ZeRO stages behind ZeroStage (zero_stage.h); each is defined in its own file. Only
// zero_stage.cc's factory and the stage files include this header.
#pragma once

#include <atomic>

#include "runtime/offload/param_swapper.h"
#include "runtime/zero/zero_stage.h"

namespace ds::runtime {

// Stages 0 and 1: whole gradients on every rank, added layer by layer during the backward and
// reduced in buckets at the boundary.
class WholeGradientStage : public ZeroStage {
 public:
  bool keepsWholeGradients() const override { return true; }
  const float* acquireParameters(int layer, bool) override { return convertedParameters(layer); }
  void gradientsDone(int layer) override {
    accumulateWholeGradients(layer);
    releaseConverted(layer);
  }

 protected:
  using ZeroStage::ZeroStage;
};

// Everything replicated; gradients all-reduced at the accumulation boundary.
class ZeroStage0 : public WholeGradientStage {
 public:
  explicit ZeroStage0(const ZeroContext& context) : WholeGradientStage(context, 1) {}
  int stage() const override { return 0; }
  void initialise(const InitialValues& draw) override;
  void reduceGradientsForStep() override { reduceBucketsAtBoundary(false); }
  // With local gradients (a 1-bit optimizer past its freeze, the reduction skipped) the
  // statistics are of this rank's whole gradient; otherwise of the slice stage 1 would own.
  GradientStatistics gradientStatistics(const std::vector<std::pair<size_t, size_t>>& groups,
                                        float unscale, std::vector<float>& scratch) override;
  void useLocalGradients(bool local) override { local_ = local; }
  bool statisticsLoadGroups() const override { return false; }
  bool optimizerIsSharded() const override { return false; }
  char* halfCopyTarget() override { return working_.data(); }
  void publishParameters(bool halfWritten) override {
    convertMasterToWorking(ctx_.count, halfWritten);
  }

 private:
  bool local_ = false;
};

// fp32 master weights and optimizer states partitioned; gradients kept whole and reduce-scattered
// at the boundary into the own slices; updated shards all-gathered.
class ZeroStage1 : public WholeGradientStage {
 public:
  explicit ZeroStage1(const ZeroContext& context) : WholeGradientStage(context, 0) {}
  int stage() const override { return 1; }
  void initialise(const InitialValues& draw) override;
  void reduceGradientsForStep() override { reduceBucketsAtBoundary(true); }
  void loadGroupGradients(size_t t0, size_t t1, std::vector<float>& out, float unscale) override;
  float* gradientsInPlace(size_t, size_t) override { return nullptr; }  // slices of whole tensors
  char* halfCopyTarget() override;
  void publishParameters(bool halfWritten) override { allGatherShards(halfWritten); }
};

// Gradients partitioned too: each bucket is reduce-scattered as soon as its layers' backward
// ends, and only the own shard is kept.
class ZeroStage2 : public ZeroStage {
 public:
  explicit ZeroStage2(const ZeroContext& context) : ZeroStage(context, 0) {}
  int stage() const override { return 2; }
  void initialise(const InitialValues& draw) override;
  const float* acquireParameters(int layer, bool) override { return convertedParameters(layer); }
  void gradientsDone(int layer) override {
    packForReductionDuringBackward(layer);
    releaseConverted(layer);
  }
  void reduceGradientsForStep() override { waitForBackwardReductions(); }
  char* halfCopyTarget() override;
  void publishParameters(bool halfWritten) override { allGatherShards(halfWritten); }
};

// Parameters partitioned too: each layer is gathered right before use (prefetched with
// overlap_comm, within stage3_max_live_parameters) and released after, unless persistent.
class ZeroStage3 : public ZeroStage {
 public:
  explicit ZeroStage3(const ZeroContext& context);
  int stage() const override { return 3; }
  void initialise(const InitialValues& draw) override;
  ~ZeroStage3() override;
  void fillMaster(size_t t0, size_t t1, float* out) override;
  const float* acquireParameters(int layer, bool inBackward) override;
  void releaseParameters(int layer) override;
  void gradientsDone(int layer) override;
  void reduceGradientsForStep() override;
  char* halfCopyTarget() override { return working_.data(); }
  GroupView beginGroup(TensorRange group, ShardUse use) override;
  void endGroup(TensorRange group, ShardUse use) override;
  bool streamsWorkingCopy() const override {
    return ctx_.config.zero.offloadParam.device == OffloadDevice::Nvme;
  }
  void publishParameters(bool halfWritten) override;
  std::vector<float> fullParameters() override;
  void startParameterOffload() override;
  size_t parameterSwapBytes() const override;
  MemoryUsage memory() const override;
  OffloadStats offloadStats() const override;

 protected:
  void bringParametersIn() override;
  void sendParametersOut() override;

 private:
  void gatherLayer(int layer);
  // All-gather of `count` elements of the working dtype a rank over `group` into `all`: qwZ's
  // int8 blocks where enabled and `mayQuantize` (not for persistent layers).
  void gatherPieces(Communicator& group, const char* own, size_t count, char* all,
                    bool mayQuantize);
  void waitLayer(int layer);
  void dropLayer(int layer);  // unless persistent
  void freeLayer(int layer);
  void prefetchFrom(int layer, int direction);
  // Each swapped layer whose shard overlaps the shard's tensors [range.first, range.second):
  // visit(its swap group, whether the range holds the layer's last element).
  template <class Visit>
  void forEachSwappedLayerIn(TensorRange range, Visit visit) const;

  std::vector<std::vector<float>> layerParams_;  // fp32 per layer: gathered
  // hpZ: per layer, this rank's piece of its node's secondary copy (the gathered rank-major
  // buffer's node-rank-th part, working dtype) from the layer's first gather after a step; the
  // later gathers (backward, further micro-batches) are over the node from these.
  std::vector<std::vector<char>> secondary_;
  // The all-gather's rank-major staging, reused by every gather (they run one at a time on the
  // communication queue): a fresh buffer per gather would be faulted in again each time.
  std::vector<char> gatherStaging_;
  std::vector<std::shared_future<void>> layerReady_;
  std::vector<bool> persistent_;  // layers that stay gathered
  size_t liveElements_ = 0;
  std::atomic<uint64_t> gathers_{0};  // counted on the communication queue
  // offload_param nvme: the swap file and its buffers, each layer's group in it (-1: stays in
  // memory).
  std::unique_ptr<ParamSwapper> paramSwapper_;
  std::vector<int> swapGroup_;
  // The swapped layer whose buffer the step is updating in place, or -1, and that buffer.
  int updatingLayer_ = -1;
  char* updatingBuffer_ = nullptr;
  // The swapped layer holding the shard's elements [begin, end) whole, or -1.
  int swappedLayerHolding(size_t begin, size_t end) const;
  // Reads the swapped layers after the shard's element shardEnd ahead into free buffers.
  void readLayersAheadOf(size_t shardEnd);
};

}  // namespace ds::runtime
