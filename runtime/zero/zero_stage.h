// ZeroStage: one ZeRO stage's strategy: where each kind of training state lives on this rank
// (working parameters, gradients, fp32 master weights) and how gradients are reduced and updated
// parameters published. The Engine owns the optimizer, loss scaling, schedules and the step's
// order; it asks its stage for everything that depends on partitioning. Offload is one more axis
// of these strategies, not branches in the engine: the optimizer's sub-groups live in the stage's
// OptimizerStateHome (optimizer_state_home.h), stage 3's parameters in its own swapper.
//   stage 0 (zero_stage0.cc): everything replicated; gradients all-reduced at the boundary.
//   stage 1 (zero_stage1.cc): master weights and optimizer states partitioned; gradients kept
//            whole and reduce-scattered at the boundary; updated shards all-gathered.
//   stage 2 (zero_stage2.cc): gradients partitioned too: reduce-scattered bucket by bucket during
//            the backward pass.
//   stage 3 (zero_stage3.cc): parameters partitioned too: gathered per layer before use.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <vector>

#include "common/aligned_vector.h"
#include "runtime/comm/communicator.h"
#include "runtime/config/ds_config.h"
#include "runtime/model/model.h"
#include "runtime/zero/comm_queue.h"
#include "runtime/zero/optimizer_state_home.h"
#include "runtime/zero/partition_layout.h"

namespace ds::runtime {

// Bytes this rank holds, by kind. modelState() is what the ZeRO formulas count; buffers are the
// staging and scratch space bounded by the bucket sizes.
struct MemoryUsage {
  size_t parameters = 0;       // working parameters (model dtype), whole or shard
  size_t gradients = 0;        // accumulated gradients (grad dtype), whole or shard
  size_t masterWeights = 0;    // fp32 master shard when it is not the working copy itself
  size_t optimizerStates = 0;  // moments etc. over the shard
  size_t buffers = 0;
  size_t modelState() const { return parameters + gradients + masterWeights + optimizerStates; }
};

struct GradientStatistics {
  bool overflow = false;  // a non-finite gradient on this rank
  double sumSquares = 0;  // of this rank's slices
};

// One tensor slice's sum of squares (runtime/zero/square_sum.h) into the rank's statistics, tensors
// in order: a non-finite sum means a non-finite gradient, counted in the norm or not.
inline void addTensorStatistics(GradientStatistics& out, double squares, bool countInNorm) {
  out.overflow = out.overflow || !std::isfinite(squares);
  if (countInNorm) out.sumSquares += squares;
}

// What every stage works with; references stay owned by the Engine.
struct ZeroContext {
  const DeepSpeedConfig& config;
  Communicator& comm;
  CommQueue& queue;
  const std::vector<ParamSpec>& specs;
  const std::vector<std::pair<size_t, size_t>>& layerTensors;  // per layer: tensor range
  DType modelType, gradType, commType;
  size_t count;  // parameters in all
  // ZeRO++'s node groups within comm (ParallelGroups::zeroNode, zeroCrossNode), or null.
  Communicator* node = nullptr;
  Communicator* crossNode = nullptr;
};

class ZeroStage {
 public:
  static std::unique_ptr<ZeroStage> make(const ZeroContext& context);
  virtual ~ZeroStage();

  virtual int stage() const = 0;
  const PartitionLayout& layout() const { return *layout_; }  // world-size slices
  // The optimizer's shard: the whole model (one part) at stage 0.
  const PartitionLayout& shardLayout() const { return *shardLayout_; }

  // Writes the fp32 initial values of elements [begin, end) of tensor t (ctx.specs' indices and
  // local element indices) at `out`: a pure function of the element, so any cut gives the same
  // values and each rank draws only what it holds (DeepSpeed's zero.Init).
  using InitialValues = std::function<void(size_t t, size_t begin, size_t end, float* out)>;
  // Fills the working copy (the whole model at stages 0-2, the own shard at 3) through `draw`,
  // tensor by tensor through a bounded fp32 scratch (kInitChunk elements) where the working dtype
  // is 16-bit, never a full fp32 copy; zeroes the gradients; allocates the master weights without
  // touching them: fillMaster writes them sub-group by sub-group, straight into their home.
  virtual void initialise(const InitialValues& draw) = 0;
  static constexpr size_t kInitChunk = size_t{1} << 16;
  // The master weights of the shard's tensors [t0, t1) from the working copy (16-bit models: the
  // rounded values, as DeepSpeed's fp32 partitions start as copies of the 16-bit parameters),
  // written at `out` (shard element shardBegin(t0) at out[0]): the master itself or a swap slot.
  virtual void fillMaster(size_t t0, size_t t1, float* out);

  // The model's layer access (runtime/model/model.h), stage by stage.
  virtual const float* acquireParameters(int layer, bool inBackward) = 0;
  // Stages 0-2: the layer's fp32 view (16-bit models) may be reused.
  virtual void releaseParameters(int layer) { releaseConverted(layer); }
  // Where the layer's backward adds its fp32 gradients, zero when given: a scratch, or at stages
  // 0 and 1 with fp32 gradients the gradient buffer itself, on the layer's first backward of the
  // accumulation window (still zero there: the same bits, without the scratch's zeroing and the
  // accumulation pass, 2% of a single-rank GPT step).
  float* layerGradients(int layer);
  virtual void gradientsDone(int layer) = 0;

  // At the accumulation boundary: every gradient reduced into this rank's gradient buffer.
  virtual void reduceGradientsForStep() = 0;
  // Stage 0 only: the step takes this rank's own gradients, not reduced (a 1-bit optimizer past
  // its freeze); gradientStatistics is then of the whole local gradient.
  virtual void useLocalGradients(bool local);
  // fp32, unscaled gradients of the shard's tensors [t0, t1) into `out`.
  virtual void loadGroupGradients(size_t t0, size_t t1, std::vector<float>& out, float unscale);
  // The shard's gradients of tensors [t0, t1) in the gradient buffer itself, where they are fp32
  // and contiguous there, for the step to unscale, clip and read in place (they are zeroed after
  // it); else nullptr, and they go through loadGroupGradients' copy. In place the step needs no
  // sub-group-sized fp32 copy (the whole model's gradients again at stage 0) and no copy pass.
  virtual float* gradientsInPlace(size_t t0, size_t t1);
  // Overflow and sum of squares over this rank's slices, in shard order (groups: the optimizer's
  // sub-groups as tensor ranges; `scratch` holds the last one's gradients afterwards).
  virtual GradientStatistics gradientStatistics(
      const std::vector<std::pair<size_t, size_t>>& groups, float unscale,
      std::vector<float>& scratch);
  // Whether gradientStatistics leaves a single sub-group's gradients loaded in `scratch` (only
  // asked where they are not in place).
  virtual bool statisticsLoadGroups() const { return true; }
  // Whether the optimizer sees only a shard (norms of whole tensors then need a sum over ranks).
  virtual bool optimizerIsSharded() const { return true; }
  float* masterData();
  // Whether the master weights are a copy of their own (16-bit models), not the working copy.
  bool separateMaster() const { return !master_.empty(); }
  // Where a fused 16-bit copy of the updated shard goes.
  virtual char* halfCopyTarget() = 0;
  // Around each optimizer sub-group's turn (the shard's tensors [first, second)), in order, in the
  // step (kUpdate) and checkpoints (kRead: saved; kOverwrite: loaded): begin makes its working
  // values reachable, end lets go of them. Stage 3 with offload_param nvme never holds the shard
  // whole: in the step, a sub-group within one swapped layer (the engine cuts sub-groups at layer
  // boundaries there) is updated in that layer's buffer itself, read first where the working copy
  // is the fp32 master, and the buffer is written out once the layer's last sub-group is done,
  // while the next one goes on; otherwise (checkpoints) the layers' shards the sub-group covers
  // come into their own arrays (read where they will be read, only declared rewritten where every
  // value will be written) and go out as each is completed (kRead: given back unchanged).
  using TensorRange = std::pair<size_t, size_t>;
  enum class ShardUse { kRead, kUpdate, kOverwrite };
  // Where the sub-group's fp32 master slice and 16-bit copy lie for this turn; null: at their
  // usual place (masterData() and halfCopyTarget() at the sub-group's shard offset).
  struct GroupView {
    float* master = nullptr;
    char* halfCopy = nullptr;
  };
  virtual GroupView beginGroup(TensorRange group, ShardUse use) { return {}; }
  virtual void endGroup(TensorRange group, ShardUse use) {}
  // Stage 3 with offload_param nvme: each sub-group is updated in its layer's buffer, so
  // sub-groups must not straddle layers, and a 16-bit working copy must be written group by group
  // (the optimizer's fused copy or a conversion right after each update), not converted whole by
  // publishParameters.
  virtual bool streamsWorkingCopy() const { return false; }
  // Makes the working copy follow the master (halfWritten: the 16-bit values are written).
  virtual void publishParameters(bool halfWritten) = 0;
  void zeroGradients();
  // Pipelines' tied weights: tensor t's accumulated gradient summed with the same tensor's on the
  // other ranks of `group` (stages 0 and 1 only, whose gradient buffer holds whole tensors).
  void allReduceTensorGradient(size_t t, Communicator& group);
  // Collective at stage 3. The working parameters as fp32, flat layout.
  virtual std::vector<float> fullParameters();
  // Where the optimizer's sub-groups live between steps (offload_optimizer), chosen by make().
  OptimizerStateHome& optimizerStates() { return *states_; }
  const OptimizerStateHome& optimizerStates() const { return *states_; }
  // offload_param nvme (stage 3): moves the layers' shards to the swap file once the master weights
  // were filled from them.
  virtual void startParameterOffload() {}
  // Stage 3's offloaded parameters still in memory (after a checkpoint, or one that failed
  // part-way) written out, their pages given back, and the writes waited for.
  void sendParametersAway() { sendParametersOut(); }
  virtual size_t parameterSwapBytes() const { return 0; }
  // Stage 3: what its gathers and offload_param nvme's buffers did so far, and where the layers
  // are now (tests and benchmarks observe the stage3_* and offload_param knobs through it).
  struct OffloadStats {
    uint64_t gathers = 0;                    // layer all-gathers run
    std::vector<int> gatheredLayers;         // layers gathered now
    uint64_t reads = 0, readsAhead = 0, hits = 0, bytesRead = 0, bytesWritten = 0;
    int maxReadsInFlight = 0;
    uint64_t maxHomeBytesIn = 0;             // the shard's bytes in memory at once, at most
    int buffers = 0;                         // offload_param.buffer_count
    size_t bufferBytes = 0;
    bool buffersLocked = false;              // pin_memory: their pages mlock'd
    std::vector<int> layersInBuffers;        // layers whose shard is in a buffer now
    std::vector<int> swappedLayers;          // layers whose shard lives in the swap file
  };
  virtual OffloadStats offloadStats() const { return {}; }
  // wall_clock_breakdown: offload_param nvme's swaps around the step since the last call (stage 3:
  // the fp32 shard read in for the update, the updated shard written out after it).
  struct ParameterSwapTimes {
    double inMs = 0, outMs = 0;
  };
  ParameterSwapTimes takeParameterSwapTimes() {
    const ParameterSwapTimes times = paramSwapTimes_;
    paramSwapTimes_ = {};
    return times;
  }

  size_t reduceBucketCount() const { return buckets_.size(); }
  // All but the optimizer states and the optimizer's gradient scratch, which the Engine adds.
  virtual MemoryUsage memory() const;

 protected:
  explicit ZeroStage(const ZeroContext& context, int shardParts);

  struct Bucket {
    int firstLayer, lastLayer;  // inclusive
    size_t t0, t1;              // tensor range
  };

  // offload_param nvme (stage 3): every swapped shard read in, or written out and given back.
  virtual void bringParametersIn() {}
  virtual void sendParametersOut() {}

  size_t layerNumel(int layer) const;
  size_t layerBase(int layer) const {
    const size_t t0 = ctx_.layerTensors[layer].first;
    return t0 < ctx_.specs.size() ? layout_->tensor(t0).flatOffset : ctx_.count;
  }
  int layerCount() const { return static_cast<int>(ctx_.layerTensors.size()); }
  // prescale_gradients: the factor applied before the reduction (1 otherwise).
  float preDivide() const;
  // One bucket's (tensors [t0, t1)) rank-major staging -> this rank's summed block (on the
  // communication queue).
  void reduceBucket(void* staging, void* own, size_t t0, size_t t1);
  // qgZ (stage 3 across nodes): the bucket through quantizedReduceScatter, its 1-D tensors (norms,
  // biases) reduce-scattered exactly beside it, as DeepSpeed's falls back for them.
  void quantizedReduceBucket(void* staging, void* own, size_t t0, size_t t1);

  // Shared pieces of the stages' strategies.
  void fillWholeWorkingCopy(const InitialValues& draw);         // stages 0-2
  // Elements [begin, end) of tensor t drawn into `out` (working dtype), through kInitChunk
  // elements of fp32 scratch where that dtype is 16-bit.
  void drawInto(const InitialValues& draw, size_t t, size_t begin, size_t end, void* out);
  void accumulateWholeGradients(int layer);                     // stages 0, 1: gradientsDone
  virtual bool keepsWholeGradients() const { return false; }    // stages 0, 1
  void reduceBucketsAtBoundary(bool keepOwnSlicesOnly);         // stages 0, 1
  void packForReductionDuringBackward(int layer);               // stages 2, 3: gradientsDone
  void waitForBackwardReductions();                             // stages 2, 3
  const float* convertedParameters(int layer);                  // stages 0-2: acquire
  void releaseConverted(int layer);                             // stages 0-2: release, done
  void allGatherShards(bool halfWritten);                       // stages 1, 2: publish
  void convertMasterToWorking(size_t count, bool halfWritten);  // stages 0, 3: publish
  // The sum of squares of `count` gradients at `from` (the gradient dtype) times `unscale`, read
  // in L1-sized blocks: no copy of a whole group.
  double unscaledSquareSum(const char* from, size_t count, float unscale) const;

  ZeroContext ctx_;
  ParameterSwapTimes paramSwapTimes_;
  double* timed(double& total) { return ctx_.config.wallClockBreakdown ? &total : nullptr; }
  std::unique_ptr<PartitionLayout> layout_, shardLayout_;
  // Buffers (element counts in comments; F = flat size, S = shard size).
  // AlignedVector: no page is touched until written (the master is filled group by group).
  AlignedVector<char> working_;      // model dtype: F (stages 0-2) or S (stage 3)
  AlignedVector<char> grads_;        // grad dtype: F (stages 0, 1) or S (stages 2, 3)
  AlignedVector<float> master_;      // S; empty when the working copy is the master itself
  AlignedVector<char> halfShard_;    // S, model dtype: CPU-Adam's fused copy at stages 1-2
  // fp32 gradients of the layers being back-propagated (more than one at a time: a MoE block's
  // backward writes its experts' layer too), in buffers kept from layer to layer.
  struct LayerScratch {
    int layer = -1;  // -1: free
    std::vector<float> values;
  };
  std::vector<LayerScratch> layerScratch_;
  float* openScratch(int layer);  // a free buffer, zeroed, for the layer
  float* scratchOf(int layer);    // the layer's, as layerGradients gave it
  void closeScratch(int layer);
  // Stages 0, 1: per layer, whether its gradients were accumulated since the last zeroing; and
  // the layers whose backward layerGradients sent to the gradient buffer itself.
  std::vector<char> layerAccumulated_;
  std::vector<int> layersInPlace_;
  // 16-bit working copy: an fp32 view of each layer the model holds. More than one at a time:
  // tied weights hold the embedding while the head's parameters are in use.
  struct ConvertedLayer {
    int layer = -1;  // -1: free
    int holds = 0;   // acquires not yet released
    std::vector<float> values;
  };
  std::vector<ConvertedLayer> converted_;
  std::vector<Bucket> buckets_;  // backward order
  std::vector<int> bucketOfLayer_;
  std::vector<std::vector<char>> staging_, received_;  // two slots each: double buffering
  std::vector<std::shared_future<void>> slotBusy_;
  std::vector<size_t> bucketSlot_;
  size_t nextSlot_ = 0;
  std::vector<std::pair<size_t, size_t>> gatherRuns_;  // stages 1-2: all-gather buckets

 private:
  void planBuckets();

  // Last: destroyed first of the stage's own, while master_ still exists. It may outlive the
  // Engine's optimizers: its transfers in flight only ever run between its slots and its file.
  std::unique_ptr<OptimizerStateHome> states_;
};

}  // namespace ds::runtime
