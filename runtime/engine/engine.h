// Engine: data-parallel training of a Model with ZeRO stages 0-3 on flat buffers, in fp32, bf16
// or fp16 (dynamic or static loss scaling). The caller runs forwardBackward() once per
// micro-batch and step() after each; step() acts only at a gradient-accumulation boundary, as
// DeepSpeed's engine.step() does.
//   stage 0: gradients all-reduced in buckets; every rank keeps everything.
//   stage 1: fp32 master weights and optimizer states partitioned; updated shards all-gathered.
//   stage 2: gradients reduce-scattered bucket by bucket during the backward pass; each rank keeps
//            only its gradient shard.
//   stage 3: parameters partitioned too: each layer is gathered right before use (prefetched with
//            overlap_comm) and released after, within stage3_max_live_parameters.
// Partitioning is by equal slices of every tensor (runtime/zero/partition_layout.h); each stage is
// a strategy of its own (runtime/zero/zero_stage.h), offload one axis of it, and the engine has
// no per-stage or offload branches.
// Every public call returns with none of the engine's collectives in flight (overlap_comm runs
// them on a thread of their own): the caller's own collectives on the same communicator, such as
// a trainer's loss average, must never interleave with a prefetch or a reduction.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "runtime/checkpoint/manifest.h"
#include "runtime/comm/communicator.h"
#include "runtime/config/ds_config.h"
#include "runtime/engine/checkpoint_parts.h"
#include "runtime/engine/device_layer_bridge.h"
#include "runtime/engine/parallel_groups.h"
#include "runtime/lr/lr_schedule.h"
#include "runtime/model/model.h"
#include "runtime/optim/optimizer.h"
#include "runtime/precision/loss_scaler.h"
#include "runtime/zero/comm_queue.h"
#include "runtime/zero/partition_layout.h"
#include "runtime/zero/zero_stage.h"

namespace ds::runtime {

// wall_clock_breakdown: milliseconds of the last accumulation window (summed over its micro-steps),
// split as DeepSpeed's timers are: forward, backward (including reductions issued during it),
// backward_allreduce (waiting for gradient reductions at the boundary) and step (optimizer and
// parameter publication).
struct StepTimes {
  double forwardMs = 0, backwardMs = 0, allreduceMs = 0, stepMs = 0;
};

// wall_clock_breakdown: the parts of the last accumulation boundary's update that DeepSpeed's ZeRO
// optimizers time themselves (how a trainer names and prints them: runtime/train/step_timers.h). Measured
// only with wall_clock_breakdown on (all zero otherwise).
struct OptimizerTimes {
  bool applied = false;  // false before the first update and after a step skipped on overflow
  int stage = 0;
  bool statesSwapped = false;  // offload_optimizer nvme
  bool paramsSwapped = false;  // offload_param nvme
  double gradientsMs = 0;      // the shard's fp32 gradients: load, unscale, statistics, clip
  double updateMs = 0;         // the optimizer's update and the master's 16-bit copy
  double loopMs = 0;           // the whole sub-group loop: gradients, state swaps and updates
  double allgatherMs = 0;      // publishing the updated parameters (stages 1-2: the all-gather)
  double swapInMs = 0;         // optimizer states and master read in (waits for the reads)
  double swapOutMs = 0;        // written back, until every write finished
  double paramSwapInMs = 0;    // stage 3 fp32: the parameter shard read in for the update
  double paramSwapOutMs = 0;   // stage 3: the updated parameter shard written out
};

// What a checkpoint load restores beyond the weights: the optimizer's states (off: fresh moments,
// as NeoX's no-load-optim) and the training position (step counters, loss scaler, lr schedule;
// off: a fresh start from the weights, as NeoX's finetune).
struct CheckpointLoadScope {
  bool optimizerStates = true;
  bool trainingState = true;
};

class Engine : private LayerAccess {
 public:
  // `comm` is the data-parallel group (the world without model or pipeline parallelism): ZeRO
  // partitions and averages over it. `groups` are the grid's other axes, over which the gradient
  // norm and fp16 overflow are agreed (the model itself holds only its slice or stage). A model's
  // MoE expert tensors (ParamSpec::expert) are a partition of their own, as DeepSpeed's expert
  // parameter groups are: reduced and partitioned over groups.expertData with expert parallelism
  // (groups.experts of more than one rank, the table holding this rank's experts only), else over
  // `comm`.
  Engine(Model& model, const DeepSpeedConfig& config, Communicator& comm, uint64_t seed,
         ParallelGroups groups = {});
  ~Engine() override;

  // One micro-batch: returns its mean loss; gradients of loss / gradient_accumulation_steps (times
  // the loss scale) are accumulated.
  float forwardBackward(const Batch& batch);
  // Returns true at an accumulation boundary (the update was applied or, on overflow, skipped).
  bool step();
  // The batch's mean loss without gradients (evaluation); collective at stage 3 like a forward.
  float evaluate(const Batch& batch);
  // A forward pass without gradients or loss that the caller runs through the engine's layer
  // access (e.g. Gpt::nextTokenLogits for generation): stage 3 gathers each layer when the model
  // asks for it and releases it after, so no rank holds the whole model. Collective at stage 3
  // like evaluate: every rank of the data group runs the same pass.
  void inferencePass(const std::function<void(LayerAccess&)>& pass);

  // One whole step, as DeepSpeed's train_batch: gradient_accumulation_steps micro-batches,
  // microBatch(0..gas-1) (this data replica's), then the boundary step. With a pipeline
  // (groups.pipe of more than one stage and a model that is a PipelineStage) the micro-batches run
  // through the 1F1B TrainSchedule (runtime/parallel/pipe_schedule.h): activations and their
  // gradients sent between neighbouring stages, the tied weights' gradients summed between the
  // first and last stage, then the step every stage takes together. Every stage calls microBatch
  // for every micro-batch (the first reads its tokens, the last its targets, all its shape and
  // the sample ids that key dropout). Without a pipeline it is the plain loop of
  // forwardBackward() and step(). Returns the step's mean loss over the micro-batches, averaged
  // over the data group, on every rank (the last stage's, broadcast over the pipe group).
  float trainBatch(const std::function<Batch(int64_t micro)>& microBatch);
  // DeepSpeed's eval_batch: gradient_accumulation_steps micro-batches without gradients, through
  // the InferenceSchedule with a pipeline; the mean loss as trainBatch returns it.
  float evalBatch(const std::function<Batch(int64_t micro)>& microBatch);

  // Collective: every rank calls them. The checkpoint goes to dir/tag (see checkpoint_files.h);
  // load with an empty tag reads dir/latest, and works at any data-parallel size and stage.
  void saveCheckpoint(const std::string& dir, const std::string& tag);
  std::string loadCheckpoint(const std::string& dir, const std::string& tag = "",
                             CheckpointLoadScope scope = {});
  // offload_optimizer nvme: the swap file's size and engine ("" / 0 without offload).
  size_t optimizerSwapBytes() const;
  std::string optimizerSwapEngine() const;
  // offload_optimizer nvme: bytes read from and written to the swap file so far.
  struct SwapTraffic {
    uint64_t read = 0, written = 0;
  };
  SwapTraffic optimizerSwapTraffic() const;
  // offload_param nvme: bytes of this rank's parameter swap file (0 without).
  size_t parameterSwapBytes() const;
  // Stage 3: its gathers so far and offload_param nvme's buffers (zeros at other stages).
  ZeroStage::OffloadStats parameterOffloadStats() const;

  // Collective at stage 3. The working parameters (model dtype) as fp32, flat layout. With a model
  // or pipe group this is the rank's own slice or stage (the model's parameters() table, local
  // shapes), whole over the data group; assembling the full model is the caller's.
  std::vector<float> fullParameters();
  // FNV-1a over fullParameters(): equal on every rank when replicas are identical.
  uint64_t parameterHash();

  size_t parameterCount() const { return count_; }
  int64_t globalSteps() const { return globalSteps_; }
  int64_t skippedSteps() const { return skippedSteps_; }
  int64_t globalSamples() const { return globalSteps_ * config_.batch.trainBatchSize; }
  double lr() const { return lr_; }
  double lossScale() const { return scaler_.scale(); }
  double lastGradNorm() const { return lastGradNorm_; }
  MemoryUsage memory() const;
  // The MoE experts' share of memory(): this rank's experts, partitioned over the expert-data
  // group (the data group without expert parallelism); zeros for a model without experts.
  MemoryUsage expertMemory() const;
  StepTimes lastStepTimes() const { return lastTimes_; }
  OptimizerTimes lastOptimizerTimes() const { return lastOptimizerTimes_; }
  // dump_state: the resolved engine state, one "key: value" per line.
  std::string describeState() const;
  const DeepSpeedConfig& config() const { return config_; }

 private:
  // LayerAccess: timing here, everything else is the stage's (runtime/zero/zero_stage.h).
  const float* acquireParameters(int layer) override;
  void releaseParameters(int layer) override;
  float* layerGradients(int layer) override;
  void gradientsDone(int layer) override;

  // engine_checkpoint.cc: every rank of `group` calls it with the same list, then every rank of
  // the grid learns the first failure; throws on every rank if any file is bad.
  struct ShardFileCheck {
    std::string path;
    ManifestFile file;
    uint64_t expectedBytes = 0;
  };
  void verifyShardFiles(Communicator& group, const std::vector<ShardFileCheck>& checks);
  // Collective over the whole grid: throws on every rank the first non-empty `problem` any rank
  // passed.
  void failTogether(const std::string& problem);
  // Collective over the whole grid: the first non-empty `mine` (up to 511 bytes) in the order of
  // the data, model and pipe groups' ranks, on every rank; empty when every rank passed "".
  std::string firstOnGrid(const std::string& mine);
  // This rank's place on the grid, from the group sizes and ranks (a group rank is the
  // coordinate on its axis).
  struct GridPlace {
    int64_t pipe = 1, model = 1, stage = 0, modelRank = 0;
  };
  GridPlace gridPlace() const;
  struct SubGroup {
    size_t t0, t1;  // tensor range; its slices are a contiguous run of the shard
    std::unique_ptr<Optimizer> optimizer;
  };
  // Parameters partitioned over one data group, with their own stage and optimizer sub-groups:
  // the model's over `comm_` and the MoE experts' (the model's last layers) over the expert-data
  // group, or over `comm_` without expert parallelism.
  struct Partition {
    Communicator* comm = nullptr;
    bool experts = false;
    int firstLayer = 0;                                   // the model's number of its layer 0
    std::vector<ParamSpec> specs;                         // offsets from its first element
    std::vector<std::pair<size_t, size_t>> layerTensors;  // per layer: tensor range [t0, t1)
    size_t count = 0;
    std::unique_ptr<ZeroStage> zero;  // where its state lives and how it is reduced/published
    // The optimizer, by sub_group_size runs of the shard; where each group's master slice and
    // state live between steps is the stage's (ZeroStage::optimizerStates()).
    std::vector<SubGroup> groups;
    std::vector<std::pair<size_t, size_t>> groupRanges() const;
  };
  // The partitions the model's table splits into (the tensors and layers of each); then each one's
  // stage, optimizer sub-groups and initial values.
  void splitPartitions();
  void buildPartition(Partition& part, const OptimizerConfig& optimizer, uint64_t seed,
                      const std::vector<std::pair<size_t, size_t>>& subGroupRuns);
  MemoryUsage partitionMemory(const Partition& part) const;
  // The partition and its own number of the model's layer `layer`.
  std::pair<Partition*, int> partitionOf(int layer);
  bool anyRankOverflowed(bool local);
  // In place over the model and pipe groups (after the data group's reduction).
  void reduceOverOtherAxes(float* value, ReduceOp op);
  void stepAtBoundary();
  // The statistics of every partition's gradients, summed (overflow on any).
  GradientStatistics gradientStatistics();
  // stepAtBoundary's steps after the overflow check. The norm over every shard and grid axis;
  // throws on every rank alike where it is not finite.
  // rankOnly: of this rank's own gradients (local ones, not reduced), not summed over the data
  // group.
  double globalGradNorm(double localSumSquares, bool rankOnly = false);
  // The optimizer's update: every sub-group in turn, its gradients unscaled and clipped; true where
  // the 16-bit working values were written on the way (fused or converted per group).
  bool updateSubGroups(Partition& part, float clip);
  OptimizerStep updateOptions(Partition& part);
  // The sub-group's fp32 gradients times unscale_ x clip: in place where the stage keeps them so,
  // else in groupGrads_.
  float* clippedGradients(Partition& part, const SubGroup& group, float clip);
  // engine_pipeline.cc: the pipe schedules' executors, and the loss every rank returns.
  PipelineStage* pipelineStage() const;
  float runTrainSchedule(PipelineStage& stage, const std::function<Batch(int64_t)>& microBatch);
  float runInferenceSchedule(PipelineStage& stage,
                             const std::function<Batch(int64_t)>& microBatch);
  float shareLoss(float lastStageMean);
  void reduceTiedGradients(PipelineStage& stage);

  Model& model_;
  // A model on a device the host cannot read takes its layers through this (null otherwise).
  std::unique_ptr<DeviceLayerBridge> bridge_;
  LayerAccess& modelAccess() { return bridge_ ? static_cast<LayerAccess&>(*bridge_) : *this; }
  DeepSpeedConfig config_;
  Communicator& comm_;
  ParallelGroups grid_;
  const DType modelType_, gradType_, commType_;
  size_t count_;
  std::unique_ptr<CommQueue> queue_;  // every collective of this engine, in one order
  std::vector<Partition> parts_;      // the model's, then (a MoE model) the experts'
  Partition& dense() { return parts_.front(); }
  const Partition& dense() const { return parts_.front(); }
  // Throws, before anything big is allocated, when the model states of every partition cannot
  // fit in the memory this process may still take (common/memory_budget.h). Per partition: what
  // it will hold (`sub-groups`: its optimizer's sub-groups' count and largest size).
  struct Footprint {
    double need = 0, parameters = 0, gradients = 0, master = 0, states = 0;
    std::string where, advice;
  };
  Footprint memoryFootprint(const Partition& part, const OptimizerConfig& optimizer, size_t groups,
                            size_t largestGroup) const;
  void checkMemoryBudget(const std::vector<Footprint>& parts) const;
  // Runs `body` (a checkpoint), then writes out whatever of stage 3's offloaded parameters is still
  // in memory (all of it after a failure part-way) and waits for the writes.
  template <class Body>
  auto withParametersWrittenBack(Body body);
  // body(g, master slice, state arrays) for each optimizer sub-group in turn, acquired from its
  // home (a slot with offload_optimizer nvme) and released after; the stage's working values of
  // the sub-group are brought in for `use` around it (ZeroStage::beginGroup / endGroup).
  template <class Body>
  void forEachStateGroup(Partition& part, ZeroStage::ShardUse use, Body body);
  void saveCheckpointResident(const std::string& dir, const std::string& tag);
  // Where a partition's part of a checkpoint goes in the (stage, model rank)'s directory: there
  // itself, or the experts' part of this rank's expert-parallel rank (checkpoint_files.h).
  std::string partitionDir(const Partition& part, const std::string& gridDir) const;
  // The save's pieces: this rank's shard file of `part` in `dir` (the master, then each state
  // array over the shard), and the manifest that lists every file of the partition's group.
  ManifestFile writeShardFile(Partition& part, const std::string& dir);
  CheckpointManifest checkpointManifest(const Partition& part, const GridPlace& place,
                                        const std::vector<OptimizerStateArray>& arrays,
                                        std::vector<ManifestFile> files) const;
  std::string loadCheckpointResident(const std::string& dir, const std::string& tag,
                                     CheckpointLoadScope scope);
  // The load's steps, in order. Throws naming the manifest where this model or optimizer cannot
  // take the checkpoint.
  void checkCheckpointFits(const std::vector<CheckpointPart>& parts,
                           CheckpointLoadScope scope) const;
  // Checksums every shard file a tensor of `part` is read from (collective over its group, then
  // the grid).
  void verifyPartsToRead(Partition& part, const std::vector<CheckpointPart>& parts,
                         const std::vector<std::vector<TensorSource>>& sources);
  // Reads this rank's slices of the partition's master (and, in scope, the optimizer's states)
  // sub-group by sub-group; true where the 16-bit working values were converted per group on the
  // way.
  bool readStatesFromParts(Partition& part, const std::vector<CheckpointPart>& parts,
                           const std::vector<std::vector<TensorSource>>& sources,
                           CheckpointLoadScope scope);
  // ZeRO++'s layouts and node groups (ParallelGroups::zeroNode) checked before anything is built.
  // `experts`: whether the model has MoE experts.
  void checkZeroPlusPlusGroups(bool experts) const;
  // The training position: run id, step counters, loss scaler, lr schedule.
  void restoreTrainingState(const CheckpointManifest& m);
  // The partition's optimizers' steps and per-tensor values (tensorScalars) from `saved`.
  void restoreOptimizerScalars(Partition& part, const CheckpointPart& saved);
  std::vector<float> groupGrads_;  // fp32 reduced, unscaled gradients of one optimizer sub-group
  float unscale_ = 1.0f;           // the current step's gradient multiplier
  std::unique_ptr<LrSchedule> scheduler_;
  LossScaler scaler_;
  double lr_;
  // The run's id in its checkpoints (manifest.h): drawn at the first save, kept by a resume.
  std::string runId_;
  int64_t microSteps_ = 0;
  int64_t globalSteps_ = 0;
  int64_t skippedSteps_ = 0;
  double lastGradNorm_ = 0.0;
  bool inBackward_ = false;
  StepTimes times_, lastTimes_;
  OptimizerTimes optimizerTimes_, lastOptimizerTimes_;
  // wall_clock_breakdown: where a phase's time goes, or nullptr (not measured).
  double* timed(double& total) { return config_.wallClockBreakdown ? &total : nullptr; }
  std::chrono::steady_clock::time_point forwardStart_, backwardStart_;
};

}  // namespace ds::runtime
