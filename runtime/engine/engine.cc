// Engine: construction, the accumulation-boundary step (reduce, unscale, overflow check, clip,
// update, publish), the layer access the model calls, and accessors. Everything that depends on
// the ZeRO stage is the stage's (runtime/zero/zero_stage*.cc); checkpoints: engine_checkpoint.cc.
#include "runtime/engine/engine.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/allocator_policy.h"
#include "common/error.h"
#include "common/fnv1a.h"
#include "common/memory_budget.h"
#include "common/phase_timer.h"
#include "runtime/optim/make_optimizer.h"
#include "runtime/zero/parallel_passes.h"
#include "runtime/config/model_state_estimate.h"

namespace ds::runtime {
namespace {

using Clock = std::chrono::steady_clock;

double elapsedMs(Clock::time_point since) {
  return std::chrono::duration<double, std::milli>(Clock::now() - since).count();
}

using TensorRanges = std::vector<std::pair<size_t, size_t>>;

void checkPipelineGrid(const ParallelGroups& grid, int zeroStage, Model& model) {
  const int stages = grid.pipe->size(), stage = grid.pipe->rank();
  // DeepSpeed's PipelineEngine refuses them too: stage 2 reduces gradients during each
  // backward and stage 3 gathers parameters per layer, neither of which fits micro-batches
  // interleaved across stages.
  if (zeroStage >= 2)
    throw Error("zero_optimization.stage " + std::to_string(zeroStage) +
                ": ZeRO stages 2 and 3 are incompatible with pipeline parallelism "
                "(pipe-parallel-size " +
                std::to_string(stages) +
                "), as in DeepSpeed; use "
                "stage 0 or 1");
  if (!model.pipelineStage())
    throw Error("pipeline of " + std::to_string(stages) +
                " stages: the model holds every layer; build this rank's stage (GptPlacement)");
  if ((stage > 0) != (grid.prevStage != nullptr) ||
      (stage < stages - 1) != (grid.nextStage != nullptr))
    throw Error("pipeline stage " + std::to_string(stage) + " of " + std::to_string(stages) +
                ": ParallelGroups needs prevStage on every stage but the first and nextStage on "
                "every stage but the last");
}

// Per layer, the run of the parameter table it owns [t0, t1).
TensorRanges layerTensorRanges(const std::vector<ParamSpec>& specs, int layers) {
  TensorRanges ranges(layers, {0, 0});
  for (size_t t = 0, begin = 0; t <= specs.size(); ++t) {
    if (t < specs.size() && specs[t].layer == specs[begin].layer) continue;
    if (begin < specs.size()) {
      const int l = specs[begin].layer;
      if (l < 0 || l >= layers || ranges[l].second != 0)
        throw Error("model: parameter \"" + specs[begin].name + "\" has layer " +
                    std::to_string(l) + "; layers must own consecutive runs of the table");
      ranges[l] = {begin, t};
    }
    begin = t;
  }
  // Layers with no parameters get an empty range at the right place.
  for (int l = 0, t = 0; l < layers; ++l) {
    if (ranges[l].second == 0) ranges[l] = {size_t(t), size_t(t)};
    t = static_cast<int>(ranges[l].second);
  }
  return ranges;
}

// The optimizer's sub-groups: runs of whole tensor slices of at most `limit` shard elements (a
// bigger tensor is a group of its own), cut at every layer's first tensor too where the stage
// streams its working copy, so each sub-group lies in one layer's buffer.
TensorRanges subGroupRuns(const PartitionLayout& shard, size_t limit, bool cutAtLayers,
                          const TensorRanges& layerTensors) {
  TensorRanges runs = shard.tensorRuns(limit);
  if (!cutAtLayers) return runs;
  TensorRanges cut;
  for (const auto& [t0, t1] : runs) {
    size_t from = t0;
    for (const auto& [l0, l1] : layerTensors)
      if (l0 > from && l0 < t1 && l0 < l1) {
        cut.push_back({from, l0});
        from = l0;
      }
    cut.push_back({from, t1});
  }
  return cut;
}

}  // namespace

Engine::Engine(Model& model, const DeepSpeedConfig& config, Communicator& comm, uint64_t seed,
               ParallelGroups groups)
    : model_(model),
      config_(config),
      comm_(comm),
      grid_(groups),
      modelType_(config.precision.modelDtype),
      gradType_(config.precision.gradAccumDtype.value_or(modelType_)),
      commType_(config.precision.communicationDtype.value_or(gradType_)),
      count_(model.parameterCount()),
      scaler_(config.precision.lossScale, modelType_ == DType::F16) {
  if (model.parameters().empty()) throw Error("model: it has no parameters to train");
  if (grid_.pipe && grid_.pipe->size() > 1) checkPipelineGrid(grid_, config_.zero.stage, model);
  if (kernels::Accelerator* device = model.deviceMemory()) {
    // A pipeline stage's boundary tensors would cross too: not written yet.
    if (model.pipelineStage())
      throw Error("pipe-parallel-size above 1 with the model on " + device->deviceName() +
                  ": runs on the CPU only so far; use device cpu");
    bridge_ = std::make_unique<DeviceLayerBridge>(model, static_cast<LayerAccess&>(*this), *device);
  }
  if (grid_.model && config_.optimizer)
    checkOptimizerModelParallel(*config_.optimizer, grid_.model->size());
  bool experts = false;
  for (const ParamSpec& spec : model.parameters()) experts = experts || spec.expert;
  if (config_.optimizer)
    checkOneBitLayout(*config_.optimizer, config_.zero.stage, grid_.pipe ? grid_.pipe->size() : 1,
                      grid_.model ? grid_.model->size() : 1, experts);
  checkZeroPlusPlusGroups(experts);
  keepFreedMemoryForReuse();
  splitPartitions();
  queue_ = std::make_unique<CommQueue>(config_.zero.overlapComm);
  const OptimizerConfig optimizer = config_.optimizer.value_or(OptimizerConfig{});
  for (Partition& part : parts_)
    part.zero =
        ZeroStage::make({config_, *part.comm, *queue_, part.specs, part.layerTensors, modelType_,
                         gradType_, commType_, part.count, part.experts ? nullptr : grid_.zeroNode,
                         part.experts ? nullptr : grid_.zeroCrossNode});
  // The optimizer runs in sub-groups of sub_group_size elements, each with its own state, as
  // DeepSpeed's stage 3 does: the fp32 gradients the update needs exist for one group at a time.
  // Each group's master slice and state go to the stage's optimizer-state home as soon as they
  // exist (with offload to NVMe: the swap file, so they are never resident whole).
  const auto groupLimit = static_cast<size_t>(std::max<int64_t>(1, config_.zero.subGroupSize));
  std::vector<TensorRanges> runs;
  std::vector<Footprint> footprints;
  for (Partition& part : parts_) {
    const PartitionLayout& shard = part.zero->shardLayout();
    runs.push_back(
        subGroupRuns(shard, groupLimit, part.zero->streamsWorkingCopy(), part.layerTensors));
    size_t largestGroup = 0;
    for (const auto& [t0, t1] : runs.back())
      largestGroup = std::max(largestGroup, shard.shardBegin(t1) - shard.shardBegin(t0));
    footprints.push_back(memoryFootprint(part, optimizer, runs.back().size(), largestGroup));
  }
  checkMemoryBudget(footprints);
  for (size_t p = 0; p < parts_.size(); ++p) buildPartition(parts_[p], optimizer, seed, runs[p]);
  lr_ = optimizer.lr();
  if (config_.scheduler) {
    scheduler_ = makeLrSchedule(*config_.scheduler, lr_, optimizer.momentum());
    lr_ = scheduler_->lr();
  }
  queue_->waitIdle();  // stage 3's persistent layers are gathered
}

void Engine::splitPartitions() {
  const std::vector<ParamSpec>& specs = model_.parameters();
  const int layers = model_.layerCount();
  const TensorRanges layerTensors = layerTensorRanges(specs, layers);
  // The expert tensors (whole layers, the model's last) are a partition of their own: over the
  // expert-data group with expert parallelism, else over the data group like the rest, but with
  // their own buckets all the same (their layers' backward comes amid the blocks', not in layer
  // order) and their own part in checkpoints.
  const bool expertParallel = grid_.experts && grid_.experts->size() > 1;
  int firstExpertLayer = layers;
  for (int l = layers; l-- > 0;) {
    const auto [t0, t1] = layerTensors[static_cast<size_t>(l)];
    if (t0 == t1) continue;
    if (!specs[t0].expert) break;
    firstExpertLayer = l;
  }
  for (const ParamSpec& spec : specs)
    if (spec.expert && spec.layer < firstExpertLayer)
      throw Error("model: expert tensor \"" + spec.name +
                  "\" is not in one of the model's last layers, which hold the experts");
  if (firstExpertLayer == 0)
    throw Error(
        "model: every parameter is an expert's; the engine keeps experts beside a model's "
        "other layers");
  if (expertParallel && !grid_.expertData)
    throw Error(
        "expert parallelism: ParallelGroups needs the expert-data group beside the "
        "expert-parallel group");
  Communicator& expertComm = expertParallel ? *grid_.expertData : comm_;
  auto part = [&](Communicator& comm, bool experts, int l0, int l1) {
    Partition p;
    p.comm = &comm;
    p.experts = experts;
    p.firstLayer = l0;
    const size_t t0 = layerTensors[static_cast<size_t>(l0)].first;
    const size_t t1 = l1 == layers ? specs.size() : layerTensors[static_cast<size_t>(l1)].first;
    const size_t base = t0 < specs.size() ? specs[t0].offset : 0;
    for (size_t t = t0; t < t1; ++t) {
      p.specs.push_back(specs[t]);
      p.specs.back().offset -= base;
      p.specs.back().layer -= l0;
      p.count += specs[t].numel;
    }
    for (int l = l0; l < l1; ++l) {
      const auto [a, b] = layerTensors[static_cast<size_t>(l)];
      p.layerTensors.push_back({a - t0, b - t0});
    }
    parts_.push_back(std::move(p));
  };
  part(comm_, false, 0, firstExpertLayer);
  if (firstExpertLayer < layers) part(expertComm, true, firstExpertLayer, layers);
}

void Engine::buildPartition(Partition& part, const OptimizerConfig& optimizer, uint64_t seed,
                            const TensorRanges& runs) {
  ZeroStage& zero = *part.zero;
  const PartitionLayout& shard = zero.shardLayout();
  // zero.Init: every rank starts from the same values, as after DeepSpeed's broadcast at
  // initialize(), but each draws only the elements it keeps (stage 3: its shard; 0-2: the working
  // copy): a value is a pure function of (seed, tensor, element), so no collective is needed and
  // no rank ever holds a full fp32 copy. With model or pipe parallelism the table is this rank's
  // slice and initTensorRange maps its local elements to the full tensor's.
  zero.initialise([&](size_t t, size_t begin, size_t end, float* out) {
    model_.initTensorRange(part.specs[t], out, seed, begin, end);
  });

  // What each group has: its master slice (16-bit models: fp32 copies of their own), then every
  // optimizer state array, all of the group's length.
  OptimizerStateHome& home = zero.optimizerStates();
  const size_t regionsPerGroup =
      (zero.separateMaster() ? 1 : 0) +
      static_cast<size_t>(optimizerStateBytesPerParameter(optimizer) / sizeof(float));
  std::vector<size_t> groupElements;
  for (const auto& [t0, t1] : runs)
    groupElements.push_back(shard.shardBegin(t1) - shard.shardBegin(t0));
  home.reserve(groupElements, regionsPerGroup);
  const std::vector<ParamSpec> shardSpecs = shard.shardSpecs(part.specs);
  // Sub-group by sub-group, straight into the home: its master slice and zeroed state are written
  // where they live (with offload to NVMe: a swap slot, then the file), never whole in memory.
  for (const auto& [t0, t1] : runs) {
    const size_t begin = shard.shardBegin(t0), end = shard.shardBegin(t1);
    const std::vector<ParamSpec> groupSpecs(shardSpecs.begin() + t0, shardSpecs.begin() + t1);
    part.groups.push_back({t0, t1, makeOptimizer(optimizer, groupSpecs, begin, end)});
    home.addGroup(zero.separateMaster() ? zero.masterData() + begin : nullptr, end - begin,
                  *part.groups.back().optimizer,
                  [&, t0 = t0, t1 = t1](float* out) { zero.fillMaster(t0, t1, out); });
  }
  zero.startParameterOffload();
}

void Engine::checkZeroPlusPlusGroups(bool experts) const {
  const ZeroConfig& z = config_.zero;
  if (!z.zeroPlusPlus()) return;
  const int pipe = grid_.pipe ? grid_.pipe->size() : 1,
            slices = grid_.model ? grid_.model->size() : 1;
  if (pipe > 1 || slices > 1 || experts)
    throw Error("zero_optimization: ZeRO++ with " +
                (pipe > 1     ? "pipe-parallel-size " + std::to_string(pipe)
                 : slices > 1 ? "model-parallel-size " + std::to_string(slices)
                              : std::string("MoE experts")) +
                " is not implemented yet; use data parallelism only");
  const Communicator* node = grid_.zeroNode;
  if (z.hpzPartitionSize > 1 && (!node || node->size() != z.hpzPartitionSize))
    throw Error("zero_optimization.zero_hpz_partition_size " + std::to_string(z.hpzPartitionSize) +
                ": this rank was given " +
                (node ? "a node group of " + std::to_string(node->size()) + " ranks"
                      : std::string("no node group")) +
                " (the worker makes one of zero_hpz_partition_size consecutive data ranks)");
  if (node && comm_.size() % node->size() != 0)
    throw Error("zero_optimization: ZeRO++'s node groups of " + std::to_string(node->size()) +
                " ranks do not divide the " + std::to_string(comm_.size()) +
                " data-parallel ranks");
}

std::pair<Engine::Partition*, int> Engine::partitionOf(int layer) {
  Partition* part = &parts_.back();
  if (layer < part->firstLayer) part = &parts_.front();
  return {part, layer - part->firstLayer};
}

Engine::Footprint Engine::memoryFootprint(const Partition& part, const OptimizerConfig& optimizer,
                                          size_t groups, size_t largestGroup) const {
  // What this rank will hold at its peak, activations aside: the model states it keeps resident,
  // CPU-Adam's 16-bit copy of the shard (stages 1-2) and construction's working set (16-bit
  // models: the fp32 scratch the initial values are drawn through; no full fp32 copy exists).
  // The master weights and optimizer states take what their home says (with offload to NVMe:
  // its swap slots, which construction fills too).
  const int stage = config_.zero.stage, world = part.comm->size();
  const double params = static_cast<double>(part.count);
  const double stateBytes = optimizerStateBytesPerParameter(optimizer);
  const ModelStateEstimate e =
      estimateModelState(stage, modelType_, gradType_, params, world, stateBytes);
  const double halfCopy = (stage == 1 || stage == 2) && modelType_ != DType::F32
                              ? dtypeBytes(modelType_) * params / world
                              : 0.0;
  const StateFootprint states =
      part.zero->optimizerStates().footprint(e, stateBytes, groups, largestGroup);
  const double drawScratch = modelType_ != DType::F32
                                 ? sizeof(float) * std::min<double>(ZeroStage::kInitChunk, params)
                                 : 0.0;
  // offload_param nvme (stage 3): the working shard is whole only while it is drawn, before the
  // gradient shard is first touched; then buffer_count buffers and max_in_cpu elements stay.
  double paramsAndGrads = e.parameters + e.gradients;
  const OffloadParamConfig& offloadParam = config_.zero.offloadParam;
  if (stage == 3 && offloadParam.device == OffloadDevice::Nvme) {
    const double shard = params / world;
    double largestLayer = 0;  // elements of the largest layer's shard: what a buffer holds
    for (const auto& [t0, t1] : part.layerTensors) {
      double layer = 0;
      for (size_t t = t0; t < t1; ++t) layer += static_cast<double>(part.specs[t].numel);
      largestLayer = std::max(largestLayer, layer / world);
    }
    const double resident = std::min(
        shard, static_cast<double>(offloadParam.maxInCpu) +
                   static_cast<double>(offloadParam.bufferCount) *
                       std::min(largestLayer, static_cast<double>(offloadParam.bufferSize)));
    paramsAndGrads = std::max(e.parameters, dtypeBytes(modelType_) * resident + e.gradients);
  }
  // A 1-bit optimizer's error feedback beside its moments.
  const double feedback = oneBitFeedbackBytesPerParameter(optimizer, world) * params;
  // hpZ: this rank's part of its node's secondary copy of the weights, from the forward to the
  // step.
  const double secondary =
      stage == 3 && config_.zero.hpzPartitionSize > 1
          ? dtypeBytes(modelType_) * params / static_cast<double>(config_.zero.hpzPartitionSize)
          : 0.0;
  return {paramsAndGrads + states.bytes + halfCopy + drawScratch + feedback + secondary,
          e.parameters,
          e.gradients,
          e.masterWeights,
          e.optimizerStates + feedback,
          states.where,
          states.advice};
}

void Engine::checkMemoryBudget(const std::vector<Footprint>& parts) const {
  Footprint all = parts.front();
  for (size_t p = 1; p < parts.size(); ++p) {
    all.need += parts[p].need;
    all.parameters += parts[p].parameters;
    all.gradients += parts[p].gradients;
    all.master += parts[p].master;
    all.states += parts[p].states;
  }
  const MemoryBudget budget = memoryBudget();
  if (all.need <= static_cast<double>(budget.availableBytes)) return;
  throw Error("the training state needs " + humanBytes(all.need) + " of memory (parameters " +
              humanBytes(all.parameters) + ", gradients " + humanBytes(all.gradients) +
              ", master weights " + humanBytes(all.master) + ", optimizer states " +
              humanBytes(all.states) + all.where + "), but only " +
              humanBytes(static_cast<double>(budget.availableBytes)) + " is left under " +
              budget.source + "; " + all.advice);
}

Engine::~Engine() {
  // Ops already queued reference the stage's buffers: let them finish first.
  queue_.reset();
}

const float* Engine::acquireParameters(int layer) {
  const auto [part, local] = partitionOf(layer);
  return part->zero->acquireParameters(local, inBackward_);
}

void Engine::releaseParameters(int layer) {
  const auto [part, local] = partitionOf(layer);
  part->zero->releaseParameters(local);
}

float* Engine::layerGradients(int layer) {
  if (!inBackward_) {
    const auto now = Clock::now();
    times_.forwardMs += std::chrono::duration<double, std::milli>(now - forwardStart_).count();
    backwardStart_ = now;
  }
  inBackward_ = true;
  const auto [part, local] = partitionOf(layer);
  return part->zero->layerGradients(local);
}

void Engine::gradientsDone(int layer) {
  const auto [part, local] = partitionOf(layer);
  part->zero->gradientsDone(local);
}

std::vector<std::pair<size_t, size_t>> Engine::Partition::groupRanges() const {
  std::vector<std::pair<size_t, size_t>> ranges;
  for (const SubGroup& group : groups) ranges.emplace_back(group.t0, group.t1);
  return ranges;
}

float Engine::forwardBackward(const Batch& batch) {
  inBackward_ = false;
  const float gradScale =
      static_cast<float>(scaler_.scale() / config_.batch.gradientAccumulationSteps);
  forwardStart_ = Clock::now();
  const float loss = model_.forwardBackward(batch, modelAccess(), gradScale);
  // layerGradients() closed the forward phase at the first backward layer.
  times_.backwardMs += elapsedMs(backwardStart_);
  queue_->waitIdle();  // the last buckets' reductions
  return loss;
}

float Engine::evaluate(const Batch& batch) {
  inBackward_ = false;
  const float loss = model_.evaluate(batch, modelAccess());
  queue_->waitIdle();  // stage 3's prefetches
  return loss;
}

void Engine::inferencePass(const std::function<void(LayerAccess&)>& pass) {
  inBackward_ = false;
  pass(modelAccess());
  queue_->waitIdle();  // stage 3's prefetches
}

bool Engine::step() {
  if (++microSteps_ % config_.batch.gradientAccumulationSteps != 0) return false;
  stepAtBoundary();
  queue_->waitIdle();  // stage 3's persistent layers are gathered again
  return true;
}

void Engine::stepAtBoundary() {
  optimizerTimes_ = {};
  optimizerTimes_.stage = config_.zero.stage;
  optimizerTimes_.statesSwapped = optimizerSwapBytes() > 0;
  optimizerTimes_.paramsSwapped = parameterSwapBytes() > 0;
  // A 1-bit optimizer past its freeze steps on this rank's own gradients and averages its
  // compressed momentum itself: nothing to reduce (DeepSpeed's enable_backward_allreduce off).
  const bool local = dense().groups.front().optimizer->takesLocalGradients();
  const auto reduceStart = Clock::now();
  for (Partition& part : parts_) {
    part.zero->useLocalGradients(local);
    if (!local) part.zero->reduceGradientsForStep();
  }
  times_.allreduceMs += elapsedMs(reduceStart);
  const auto stepStart = Clock::now();
  struct Finish {  // however step() returns, the window's times are published
    Engine& e;
    Clock::time_point start;
    ~Finish() {
      e.times_.stepMs += elapsedMs(start);
      e.lastTimes_ = e.times_;
      e.times_ = {};
      for (Partition& part : e.parts_) {
        const ZeroStage::ParameterSwapTimes swaps = part.zero->takeParameterSwapTimes();
        e.optimizerTimes_.paramSwapInMs += swaps.inMs;
        e.optimizerTimes_.paramSwapOutMs += swaps.outMs;
      }
      e.lastOptimizerTimes_ = e.optimizerTimes_;
    }
  } finish{*this, stepStart};

  // Gradients were summed over ranks (after the optional pre-division) and carry the loss
  // scale: one multiply (`unscale`) restores the mean gradient of the global batch.
  // Local gradients are the rank's own mean already.
  const PrecisionConfig& p = config_.precision;
  const double world = comm_.size();
  const double post = local                 ? 1.0
                      : p.prescaleGradients ? p.gradientPredivideFactor / world
                                            : 1.0 / world;
  unscale_ = static_cast<float>(post / scaler_.scale());

  const GradientStatistics statistics = gradientStatistics();
  const bool skipped = modelType_ == DType::F16 && anyRankOverflowed(statistics.overflow);
  ++globalSteps_;
  if (skipped) {
    ++skippedSteps_;
    for (Partition& part : parts_) part.zero->zeroGradients();
    scaler_.update(true);  // throws at the minimum scale
    return;
  }
  // Local gradients: each rank clips by its own norm, as DeepSpeed's with the reduction off.
  lastGradNorm_ = globalGradNorm(statistics.sumSquares, local);
  float clip = 1.0f;
  if (config_.gradientClipping > 0.0) {
    const double coefficient = config_.gradientClipping / (lastGradNorm_ + 1e-6);
    if (coefficient < 1.0) clip = static_cast<float>(coefficient);
  }
  for (Partition& part : parts_) {
    const bool halfWritten = updateSubGroups(part, clip);
    {
      PhaseTimer timer(timed(optimizerTimes_.allgatherMs));
      part.zero->publishParameters(halfWritten);
    }
    {
      // The write-backs' wait: DeepSpeed's swap-out timer also ends when the writes are done.
      PhaseTimer timer(timed(optimizerTimes_.swapOutMs));
      // After publishing: the next step's first read overlaps forward and backward.
      part.zero->optimizerStates().endStep();
    }
    part.zero->zeroGradients();
  }
  scaler_.update(false);
  if (scheduler_) {
    scheduler_->step();
    lr_ = scheduler_->lr();
  }
  optimizerTimes_.applied = true;
}

GradientStatistics Engine::gradientStatistics() {
  PhaseTimer timer(timed(optimizerTimes_.gradientsMs));
  GradientStatistics all;
  for (Partition& part : parts_) {
    const GradientStatistics s =
        part.zero->gradientStatistics(part.groupRanges(), unscale_, groupGrads_);
    all.overflow = all.overflow || s.overflow;
    all.sumSquares += s.sumSquares;
  }
  return all;
}

double Engine::globalGradNorm(double localSumSquares, bool rankOnly) {
  // Every rank summed the squares of its own slices, in shard order: the experts' partition
  // covers its experts' slices over the expert-data group, so the data group's sum has every
  // expert once, as it has every other tensor.
  float total = static_cast<float>(localSumSquares);
  if (!rankOnly) queue_->run([&] { comm_.allReduce(&total, 1); });
  reduceOverOtherAxes(&total, ReduceOp::Sum);
  const double norm = std::sqrt(static_cast<double>(total));
  // Every rank summed the same totals, so all stop here together. fp16 skips such a step and
  // lowers its loss scale instead (before this); bf16 and fp32 have nothing that could recover.
  if (!std::isfinite(norm))
    throw Error("step " + std::to_string(globalSteps_) + ": the gradient norm is " +
                (std::isnan(norm) ? "nan" : "inf") + " in " + dtypeName(modelType_) +
                ", which has no loss scaler to skip the step: training diverged or a non-finite "
                "value entered the model; lower the learning rate, check the optimizer's eps and "
                "the init method's std, or train in fp16 with dynamic loss scaling");
  return norm;
}

OptimizerStep Engine::updateOptions(Partition& part) {
  OptimizerStep update;
  update.lr = lr_;
  // DeepSpeed cycles betas[0] only; torch SGD has none, so OneCycle's momentum is not applied.
  if (scheduler_ && config_.optimizer && config_.optimizer->type != OptimizerType::SGD) {
    update.momentum = scheduler_->momentum();
    if (update.momentum) update.beta2 = LrSchedule::kCycledBeta2;
  }
  update.dataGroup = part.comm;
  if (part.zero->optimizerIsSharded())
    update.sumAcrossShards = [this, comm = part.comm](double* values, size_t count) {
      std::vector<float> sums(values, values + count);
      queue_->run([&] { comm->allReduce(sums.data(), count); });
      for (size_t i = 0; i < count; ++i) values[i] = sums[i];
    };
  return update;
}

bool Engine::updateSubGroups(Partition& part, float clip) {
  OptimizerStep update = updateOptions(part);
  ZeroStage& zero = *part.zero;
  // CPU-Adam writes the 16-bit working values in the same pass as the update, where the stage
  // wants them (the working copy itself, or a 16-bit shard to be all-gathered). Where the home
  // streams the master (offload to NVMe) the slice lies in a swap slot only while its group is
  // updated, and where the stage streams its working copy (stage 3's offload_param) the layers
  // go out as their sub-groups finish: an optimizer that does not fuse the copy then has it
  // converted right after each update, group by group.
  OptimizerStateHome& home = zero.optimizerStates();
  const bool fused = modelType_ != DType::F32 && part.groups.front().optimizer->fusesHalfCopy();
  const bool convertPerGroup =
      (home.streamsMaster() || zero.streamsWorkingCopy()) && zero.separateMaster() && !fused;
  char* halfOut = fused || convertPerGroup ? zero.halfCopyTarget() : nullptr;
  OptimizerTimes& times = optimizerTimes_;
  PhaseTimer loop(timed(times.loopMs));
  for (size_t gi = 0; gi < part.groups.size(); ++gi) {
    const SubGroup& group = part.groups[gi];
    const size_t begin = zero.shardLayout().shardBegin(group.t0);
    const ZeroStage::GroupView view =
        zero.beginGroup({group.t0, group.t1}, ZeroStage::ShardUse::kUpdate);
    float* master;
    {
      PhaseTimer timer(timed(times.swapInMs));
      master =
          home.acquire(gi, view.master ? view.master : zero.masterData() + begin, *group.optimizer);
    }
    char* halfAt = view.halfCopy ? view.halfCopy
                   : halfOut     ? halfOut + begin * dtypeBytes(modelType_)
                                 : nullptr;
    const float* grads = clippedGradients(part, group, clip);
    {
      PhaseTimer timer(timed(times.updateMs));
      if (fused)
        update.halfCopy = {reinterpret_cast<uint16_t*>(halfAt), modelType_ == DType::BF16
                                                                    ? kernels::HalfFormat::Bf16
                                                                    : kernels::HalfFormat::Fp16};
      group.optimizer->step(master, grads, update);
      if (convertPerGroup)
        convertElements(master, DType::F32, halfAt, modelType_,
                        zero.shardLayout().shardBegin(group.t1) - begin);
    }
    {
      PhaseTimer timer(timed(times.swapOutMs));
      home.release(gi, *group.optimizer);
    }
    zero.endGroup({group.t0, group.t1}, ZeroStage::ShardUse::kUpdate);
  }
  return fused || convertPerGroup;
}

float* Engine::clippedGradients(Partition& part, const SubGroup& group, float clip) {
  ZeroStage& zero = *part.zero;
  const size_t begin = zero.shardLayout().shardBegin(group.t0);
  float* grads = zero.gradientsInPlace(group.t0, group.t1);
  PhaseTimer timer(timed(optimizerTimes_.gradientsMs));
  if (grads) {
    // (g x unscale) x clip, as the copy and the clip pass below round them; no pass where both
    // are 1 (one fp32 rank without clipping).
    const float scale = unscale_;
    if (scale != 1.0f || clip < 1.0f)
      forEachChunk(zero.shardLayout().shardBegin(group.t1) - begin, [&](size_t from, size_t to) {
        for (size_t i = from; i < to; ++i) grads[i] = grads[i] * scale * clip;
      });
    return grads;
  }
  // With one sub-group in one partition (the usual case) its gradients are still loaded from the
  // statistics.
  if (parts_.size() > 1 || part.groups.size() > 1 || !zero.statisticsLoadGroups())
    zero.loadGroupGradients(group.t0, group.t1, groupGrads_, unscale_);
  if (clip < 1.0f)
    forEachChunk(groupGrads_.size(), [&](size_t from, size_t to) {
      for (size_t i = from; i < to; ++i) groupGrads_[i] *= clip;
    });
  return groupGrads_.data();
}

bool Engine::anyRankOverflowed(bool local) {
  float overflow = local ? 1.0f : 0.0f;
  queue_->run([&] { comm_.allReduce(&overflow, 1, DType::F32, ReduceOp::Max); });
  reduceOverOtherAxes(&overflow, ReduceOp::Max);
  return overflow > 0.0f;
}

void Engine::reduceOverOtherAxes(float* value, ReduceOp op) {
  for (Communicator* group : {grid_.model, grid_.pipe})
    if (group && group->size() > 1) group->allReduce(value, 1, DType::F32, op);
}

std::vector<float> Engine::fullParameters() {
  std::vector<float> all = dense().zero->fullParameters();
  for (size_t p = 1; p < parts_.size(); ++p) {
    const std::vector<float> more = parts_[p].zero->fullParameters();
    all.insert(all.end(), more.begin(), more.end());
  }
  return all;
}

uint64_t Engine::parameterHash() {
  const std::vector<float> params = fullParameters();
  return fnv1a64(params.data(), params.size() * sizeof(float));
}

std::string Engine::describeState() const {
  const MemoryUsage m = memory();
  std::string out;
  auto line = [&](const std::string& key, const std::string& value) {
    out += key + ": " + value + "\n";
  };
  line("zero_stage", std::to_string(config_.zero.stage));
  line("world_size", std::to_string(comm_.size()) + " (" + comm_.backendName() + ")");
  line("parameters", std::to_string(count_) + " in " + std::to_string(model_.parameters().size()) +
                         " tensors, " + std::to_string(model_.layerCount()) + " layers");
  line("shard_elements", std::to_string(dense().zero->shardLayout().shardSize()));
  if (parts_.size() > 1) {
    const Partition& experts = parts_.back();
    line("expert_parameters",
         std::to_string(experts.count) + " in " + std::to_string(experts.specs.size()) +
             " tensors over the expert-data group of " + std::to_string(experts.comm->size()) +
             ", shard " + std::to_string(experts.zero->shardLayout().shardSize()));
  }
  line("dtypes", std::string("model ") + dtypeName(modelType_) + ", gradients " +
                     dtypeName(gradType_) + ", communication " + dtypeName(commType_));
  line("loss_scale", std::to_string(scaler_.scale()) + (scaler_.dynamic() ? " (dynamic)" : ""));
  size_t subGroups = 0, buckets = 0;
  for (const Partition& part : parts_) {
    subGroups += part.groups.size();
    buckets += part.zero->reduceBucketCount();
  }
  line("optimizer", std::string(dense().groups.front().optimizer->name()) + ", lr " +
                        std::to_string(lr_) + ", " + std::to_string(subGroups) +
                        " sub-group(s) (sub_group_size " +
                        std::to_string(config_.zero.subGroupSize) + ")");
  line("reduce_buckets", std::to_string(buckets) + " (reduce_bucket_size " +
                             std::to_string(config_.zero.reduceBucketSize) + ")");
  line("overlap_comm", config_.zero.overlapComm ? "true" : "false");
  line("model_state_bytes", std::to_string(m.modelState()) + " (parameters " +
                                std::to_string(m.parameters) + ", gradients " +
                                std::to_string(m.gradients) + ", master " +
                                std::to_string(m.masterWeights) + ", optimizer " +
                                std::to_string(m.optimizerStates) + ")");
  line("buffer_bytes", std::to_string(m.buffers));
  return out;
}

namespace {

void addMemory(MemoryUsage& m, const MemoryUsage& u) {
  m.parameters += u.parameters;
  m.gradients += u.gradients;
  m.masterWeights += u.masterWeights;
  m.optimizerStates += u.optimizerStates;
  m.buffers += u.buffers;
}

}  // namespace

MemoryUsage Engine::partitionMemory(const Partition& part) const {
  MemoryUsage m = part.zero->memory();
  for (const SubGroup& group : part.groups) m.optimizerStates += group.optimizer->stateBytes();
  return m;
}

MemoryUsage Engine::expertMemory() const {
  return parts_.back().experts ? partitionMemory(parts_.back()) : MemoryUsage{};
}

MemoryUsage Engine::memory() const {
  MemoryUsage m;
  for (const Partition& part : parts_) addMemory(m, partitionMemory(part));
  m.buffers += groupGrads_.capacity() * sizeof(float);
  return m;
}

}  // namespace ds::runtime
