// Engine: construction, the accumulation-boundary step (reduce, unscale, overflow check, clip,
// update, publish), and accessors. Layer-by-layer gathering and reduction: engine_layers.cc;
// checkpoints: engine_checkpoint.cc.
#include "runtime/engine/engine.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/error.h"
#include "common/fnv1a.h"
#include "runtime/optim/make_optimizer.h"

namespace ds::runtime {
namespace {

using Clock = std::chrono::steady_clock;

double elapsedMs(Clock::time_point since) {
  return std::chrono::duration<double, std::milli>(Clock::now() - since).count();
}

bool masterIsWorking(int stage, DType modelType) {
  // fp32 working parameters in shard layout can be updated in place: stage 0 (the shard is
  // everything) and stage 3 (the working copy is the shard).
  return modelType == DType::F32 && (stage == 0 || stage == 3);
}

}  // namespace

Engine::Engine(Model& model, const DeepSpeedConfig& config, Communicator& comm, uint64_t seed)
    : model_(model),
      config_(config),
      comm_(comm),
      stage_(config.zero.stage),
      modelType_(config.precision.modelDtype),
      gradType_(config.precision.gradAccumDtype.value_or(modelType_)),
      commType_(config.precision.communicationDtype.value_or(gradType_)),
      count_(model.parameterCount()),
      specs_(model.parameters()),
      scaler_(config.precision.lossScale, modelType_ == DType::F16) {
  if (stage_ < 0 || stage_ > 3)
    throw Error("zero_optimization.stage: expected 0..3, got " + std::to_string(stage_));
  if (specs_.empty()) throw Error("model: it has no parameters to train");
  const int layers = model.layerCount();
  layerTensors_.assign(layers, {0, 0});
  for (size_t t = 0, begin = 0; t <= specs_.size(); ++t) {
    if (t < specs_.size() && specs_[t].layer == specs_[begin].layer) continue;
    if (begin < specs_.size()) {
      const int l = specs_[begin].layer;
      if (l < 0 || l >= layers || layerTensors_[l].second != 0)
        throw Error("model: parameter \"" + specs_[begin].name + "\" has layer " +
                    std::to_string(l) + "; layers must own consecutive runs of the table");
      layerTensors_[l] = {begin, t};
    }
    begin = t;
  }
  // Layers with no parameters get an empty range at the right place.
  for (int l = 0, t = 0; l < layers; ++l) {
    if (layerTensors_[l].second == 0) layerTensors_[l] = {size_t(t), size_t(t)};
    t = static_cast<int>(layerTensors_[l].second);
  }

  layout_ = std::make_unique<PartitionLayout>(specs_, comm.size(), comm.rank());
  shardLayout_ = stage_ == 0 ? std::make_unique<PartitionLayout>(specs_, 1, 0)
                             : std::make_unique<PartitionLayout>(specs_, comm.size(), comm.rank());
  const size_t shard = shardLayout_->shardSize();
  const size_t T = specs_.size();

  // Every rank initialises identically, then rank 0's values win, as DeepSpeed broadcasts the
  // model at initialize(). Master weights start from the rounded working values, as DeepSpeed's
  // fp32 partitions are copies of the 16-bit parameters.
  std::vector<float> init(count_);
  model.initParameters(init.data(), seed);
  comm.broadcast(init.data(), count_, 0);
  if (stage_ == 3) {
    working_.resize(shard * dtypeBytes(modelType_));
    layout_->extractShard(init.data(), DType::F32, 0, 0, T, working_.data(), modelType_);
  } else {
    working_.resize(count_ * dtypeBytes(modelType_));
    convertElements(init.data(), DType::F32, working_.data(), modelType_, count_);
  }
  if (!masterIsWorking(stage_, modelType_)) {
    master_.resize(shard);
    if (stage_ == 3)
      convertElements(working_.data(), modelType_, master_.data(), DType::F32, shard);
    else
      shardLayout_->extractShard(working_.data(), modelType_, 0, 0, T, master_.data(), DType::F32);
  }
  grads_.assign((stage_ >= 2 ? shard : count_) * dtypeBytes(gradType_), 0);

  // The optimizer runs in sub-groups of whole tensor slices of at most sub_group_size elements
  // (a bigger tensor is a group of its own), each with its own state, as DeepSpeed's stage 3
  // does: the fp32 gradients the update needs exist for one group at a time.
  const OptimizerConfig optimizer = config_.optimizer.value_or(OptimizerConfig{});
  const std::vector<ParamSpec> shardSpecs = shardLayout_->shardSpecs(specs_);
  const auto groupLimit = static_cast<size_t>(std::max<int64_t>(1, config_.zero.subGroupSize));
  for (const auto& [t0, t1] : shardLayout_->tensorRuns(groupLimit)) {
    const std::vector<ParamSpec> groupSpecs(shardSpecs.begin() + t0, shardSpecs.begin() + t1);
    groups_.push_back({t0, t1,
                       makeOptimizer(optimizer, groupSpecs, shardLayout_->shardBegin(t0),
                                     shardLayout_->shardBegin(t1))});
  }
  // Stages 1, 2: updated shards are all-gathered in runs of allgather_bucket_size elements.
  const auto gatherLimit =
      static_cast<size_t>(std::max<int64_t>(1, config_.zero.allgatherBucketSize));
  gatherRuns_ = layout_->tensorRuns(gatherLimit / comm.size());
  lr_ = optimizer.lr();
  if (config_.scheduler) {
    scheduler_ = makeLrSchedule(*config_.scheduler, lr_, optimizer.momentum());
    lr_ = scheduler_->lr();
  }

  queue_ = std::make_unique<CommQueue>(config_.zero.overlapComm);
  planBuckets();
  layerParams_.resize(layers);
  layerReady_.resize(layers);
  persistent_.assign(layers, false);
  if (stage_ == 3) {
    for (int l = 0; l < layers; ++l) {
      persistent_[l] =
          static_cast<int64_t>(layerNumel(l)) <= config_.zero.paramPersistenceThreshold;
      if (persistent_[l]) gatherLayer(l);
    }
  }
}

Engine::~Engine() {
  // Ops already queued reference this engine's buffers: let them finish first.
  queue_.reset();
}

size_t Engine::layerNumel(int layer) const {
  const auto [t0, t1] = layerTensors_[layer];
  if (t0 == t1) return 0;
  return layout_->tensor(t1 - 1).flatOffset + layout_->tensor(t1 - 1).numel -
         layout_->tensor(t0).flatOffset;
}

float Engine::forwardBackward(const Batch& batch) {
  inBackward_ = false;
  const float gradScale =
      static_cast<float>(scaler_.scale() / config_.batch.gradientAccumulationSteps);
  forwardStart_ = Clock::now();
  const float loss = model_.forwardBackward(batch, *this, gradScale);
  // layerGradients() closed the forward phase at the first backward layer.
  times_.backwardMs += elapsedMs(backwardStart_);
  return loss;
}

float* Engine::masterData() {
  return master_.empty() ? reinterpret_cast<float*>(working_.data()) : master_.data();
}

bool Engine::step() {
  if (++microSteps_ % config_.batch.gradientAccumulationSteps != 0) return false;
  const auto reduceStart = Clock::now();
  reduceGradientsForStep();
  times_.allreduceMs += elapsedMs(reduceStart);
  const auto stepStart = Clock::now();
  struct Finish {  // however step() returns, the window's times are published
    Engine& e;
    Clock::time_point start;
    ~Finish() {
      e.times_.stepMs += elapsedMs(start);
      e.lastTimes_ = e.times_;
      e.times_ = {};
    }
  } finish{*this, stepStart};

  // Gradients were summed over ranks (after the optional pre-division) and carry the loss
  // scale: one multiply (`unscale`) restores the mean gradient of the global batch.
  const PrecisionConfig& p = config_.precision;
  const double world = comm_.size();
  const double post = p.prescaleGradients ? p.gradientPredivideFactor / world : 1.0 / world;
  unscale_ = static_cast<float>(post / scaler_.scale());

  const GradientStatistics statistics = gradientStatistics();
  lastStepSkipped_ = modelType_ == DType::F16 && anyRankOverflowed(statistics.overflow);
  ++globalSteps_;
  if (lastStepSkipped_) {
    ++skippedSteps_;
    zeroGradients();
    scaler_.update(true);  // throws at the minimum scale
    return true;
  }
  // The norm over all shards: every rank summed the squares of its own slices, in shard order.
  float total = static_cast<float>(statistics.sumSquares);
  queue_->run([&] { comm_.allReduce(&total, 1); });
  lastGradNorm_ = std::sqrt(static_cast<double>(total));
  float clip = 1.0f;
  if (config_.gradientClipping > 0.0) {
    const double coefficient = config_.gradientClipping / (lastGradNorm_ + 1e-6);
    if (coefficient < 1.0) clip = static_cast<float>(coefficient);
  }

  OptimizerStep update;
  update.lr = lr_;
  // DeepSpeed cycles betas[0] only; torch SGD has none, so OneCycle's momentum is not applied.
  if (scheduler_ && config_.optimizer && config_.optimizer->type != OptimizerType::SGD) {
    update.momentum = scheduler_->momentum();
    if (update.momentum) update.beta2 = LrSchedule::kCycledBeta2;
  }
  if (stage_ > 0)
    update.sumAcrossShards = [this](double* values, size_t count) {
      std::vector<float> sums(values, values + count);
      queue_->run([&] { comm_.allReduce(sums.data(), count); });
      for (size_t i = 0; i < count; ++i) values[i] = sums[i];
    };
  // CPU-Adam writes the 16-bit working values in the same pass as the update: straight into the
  // working copy at stages 0 and 3 (it is laid out as the shard), into a 16-bit shard to be
  // all-gathered at stages 1 and 2.
  const bool fused = modelType_ != DType::F32 && groups_.front().optimizer->fusesHalfCopy();
  char* halfOut = nullptr;
  if (fused) {
    const size_t bytes = dtypeBytes(modelType_);
    if (stage_ == 1 || stage_ == 2) halfShard_.resize(shardLayout_->shardSize() * bytes);
    halfOut = stage_ == 1 || stage_ == 2 ? halfShard_.data() : working_.data();
  }
  for (const SubGroup& group : groups_) {
    // With one sub-group (the usual case) its gradients are still loaded from the statistics.
    if (groups_.size() > 1 || stage_ == 0) loadGroupGradients(group);
    if (clip < 1.0f)
      for (float& g : groupGrads_) g *= clip;
    const size_t begin = shardLayout_->shardBegin(group.t0);
    if (fused)
      update.halfCopy = {
          reinterpret_cast<uint16_t*>(halfOut + begin * dtypeBytes(modelType_)),
          modelType_ == DType::BF16 ? kernels::HalfFormat::Bf16 : kernels::HalfFormat::Fp16};
    group.optimizer->step(masterData() + begin, groupGrads_.data(), update);
  }
  publishParameters(fused);
  zeroGradients();
  scaler_.update(false);
  if (scheduler_) {
    scheduler_->step();
    lr_ = scheduler_->lr();
  }
  return true;
}

void Engine::reduceGradientsForStep() {
  if (stage_ >= 2) {
    // Every bucket was reduced during the backward passes; wait for the last ones.
    for (auto& busy : slotBusy_)
      if (busy.valid()) busy.get();
    return;
  }
  // Both stages use the rank-major staging of stage 1, so every element is summed in the same
  // collective position whatever the stage: stage 0 (all-reduce) and 1 (reduce-scatter) agree
  // bit for bit on every backend, ring ones included.
  for (const Bucket& b : buckets_) {
    const size_t chunk = layout_->chunk(b.t0, b.t1);
    std::vector<char>& in = staging_[0];
    in.resize(comm_.size() * chunk * dtypeBytes(commType_));
    layout_->pack(grads_.data(), gradType_, 0, b.t0, b.t1, in.data(), commType_, preDivide());
    // The sums go back into the gradient buffer: whole at stage 0, the own slices at stage 1.
    if (stage_ == 0) {
      queue_->run([&] { comm_.allReduce(in.data(), comm_.size() * chunk, commType_); });
      layout_->unpack(in.data(), commType_, b.t0, b.t1, grads_.data(), gradType_, 0);
    } else {
      std::vector<char>& reduced = received_[0];
      reduced.resize(chunk * dtypeBytes(commType_));
      queue_->run([&] { reduceBucket(in.data(), reduced.data(), chunk); });
      layout_->insertShard(reduced.data(), commType_, b.t0, b.t1, grads_.data(), gradType_, 0);
    }
  }
}

void Engine::reduceBucket(void* staging, void* own, size_t chunk) {
  if (config_.zero.reduceScatter) {
    comm_.reduceScatter(staging, own, chunk, commType_);
    return;
  }
  // reduce_scatter: false, DeepSpeed's all-reduce alternative: everyone gets every sum and keeps
  // its own block (twice the traffic; the same bits, since both split the buffer alike).
  const size_t bytes = chunk * dtypeBytes(commType_);
  comm_.allReduce(staging, comm_.size() * chunk, commType_);
  std::memcpy(own, static_cast<const char*>(staging) + comm_.rank() * bytes, bytes);
}

void Engine::loadGroupGradients(const SubGroup& group) {
  const size_t chunk = shardLayout_->chunk(group.t0, group.t1);
  groupGrads_.resize(chunk);
  const size_t bytes = dtypeBytes(gradType_);
  if (stage_ == 1) {  // the own slices sit in the whole (flat) gradient buffer
    layout_->extractShard(grads_.data(), gradType_, 0, group.t0, group.t1, groupGrads_.data(),
                          DType::F32);
    for (float& g : groupGrads_) g *= unscale_;
  } else {  // stage 0: the shard is the flat buffer; stages 2, 3: the buffer is the shard
    convertElements(grads_.data() + shardLayout_->shardBegin(group.t0) * bytes, gradType_,
                    groupGrads_.data(), DType::F32, chunk, unscale_);
  }
}

Engine::GradientStatistics Engine::gradientStatistics() {
  GradientStatistics out;
  auto add = [&](const float* g, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      out.overflow = out.overflow || !std::isfinite(g[i]);
      out.sumSquares += static_cast<double>(g[i]) * g[i];
    }
  };
  if (stage_ > 0) {
    for (const SubGroup& group : groups_) {
      loadGroupGradients(group);
      add(groupGrads_.data(), groupGrads_.size());
    }
    return out;
  }
  // Stage 0 holds every gradient but takes the slices stage 1 would own, in the same order, so
  // the norm has the same bits at every stage.
  const size_t bytes = dtypeBytes(gradType_);
  float block[1024];
  for (size_t t = 0; t < specs_.size(); ++t) {
    const TensorPlacement& p = layout_->tensor(t);
    const size_t begin = std::min(p.numel, comm_.rank() * p.slice);
    const size_t end = std::min(p.numel, begin + p.slice);
    for (size_t i = begin; i < end; i += 1024) {
      const size_t n = std::min<size_t>(1024, end - i);
      convertElements(grads_.data() + (p.flatOffset + i) * bytes, gradType_, block, DType::F32, n,
                      unscale_);
      add(block, n);
    }
  }
  return out;
}

bool Engine::anyRankOverflowed(bool local) {
  float overflow = local ? 1.0f : 0.0f;
  queue_->run([&] { comm_.allReduce(&overflow, 1, DType::F32, ReduceOp::Max); });
  return overflow > 0.0f;
}

void Engine::publishParameters(bool halfShardWritten) {
  if (stage_ == 0) {
    if (!master_.empty() && !halfShardWritten)
      convertElements(master_.data(), DType::F32, working_.data(), modelType_, count_);
    return;
  }
  if (stage_ == 3) {
    if (!master_.empty() && !halfShardWritten)
      convertElements(master_.data(), DType::F32, working_.data(), modelType_, master_.size());
    // Gathered copies are stale now; persistent layers are re-gathered at once.
    for (int l = 0; l < model_.layerCount(); ++l) {
      freeLayer(l);
      if (persistent_[l]) gatherLayer(l);
    }
    return;
  }
  // Stages 1 and 2: all-gather the updated shards into the whole working copy, bucket by bucket.
  const size_t world = comm_.size(), bytes = dtypeBytes(modelType_);
  for (const auto& [t0, t1] : gatherRuns_) {
    const size_t chunk = layout_->chunk(t0, t1);
    std::vector<char>& all = staging_[0];
    all.resize(world * chunk * bytes);
    const char* own = halfShardWritten
                          ? halfShard_.data() + layout_->shardBegin(t0) * bytes
                          : reinterpret_cast<const char*>(master_.data() + layout_->shardBegin(t0));
    if (!halfShardWritten && modelType_ != DType::F32) {
      received_[0].resize(chunk * bytes);
      convertElements(own, DType::F32, received_[0].data(), modelType_, chunk);
      own = received_[0].data();
    }
    queue_->run([&] {
      if (config_.zero.allgatherPartitions) {
        comm_.allGather(own, all.data(), chunk, modelType_);
      } else {  // DeepSpeed's alternative: one broadcast per rank
        std::memcpy(all.data() + comm_.rank() * chunk * bytes, own, chunk * bytes);
        for (size_t q = 0; q < world; ++q)
          comm_.broadcast(all.data() + q * chunk * bytes, chunk, modelType_, static_cast<int>(q));
      }
    });
    layout_->unpack(all.data(), modelType_, t0, t1, working_.data(), modelType_, 0);
  }
}

void Engine::zeroGradients() { std::fill(grads_.begin(), grads_.end(), 0); }

std::vector<float> Engine::fullParameters() {
  std::vector<float> out(count_);
  if (stage_ < 3) {
    convertElements(working_.data(), modelType_, out.data(), DType::F32, count_);
    return out;
  }
  const size_t shard = layout_->shardSize(), bytes = dtypeBytes(modelType_);
  std::vector<char> all(comm_.size() * shard * bytes);
  queue_->run([&] { comm_.allGather(working_.data(), all.data(), shard, modelType_); });
  layout_->unpack(all.data(), modelType_, 0, specs_.size(), out.data(), DType::F32, 0);
  return out;
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
  line("zero_stage", std::to_string(stage_));
  line("world_size", std::to_string(comm_.size()) + " (" + comm_.backendName() + ")");
  line("parameters", std::to_string(count_) + " in " + std::to_string(specs_.size()) +
                         " tensors, " + std::to_string(model_.layerCount()) + " layers");
  line("shard_elements", std::to_string(shardLayout_->shardSize()));
  line("dtypes", std::string("model ") + dtypeName(modelType_) + ", gradients " +
                     dtypeName(gradType_) + ", communication " + dtypeName(commType_));
  line("loss_scale", std::to_string(scaler_.scale()) + (scaler_.dynamic() ? " (dynamic)" : ""));
  line("optimizer", std::string(groups_.front().optimizer->name()) + ", lr " + std::to_string(lr_) +
                        ", " + std::to_string(groups_.size()) + " sub-group(s) (sub_group_size " +
                        std::to_string(config_.zero.subGroupSize) + ")");
  line("reduce_buckets", std::to_string(buckets_.size()) + " (reduce_bucket_size " +
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

MemoryUsage Engine::memory() const {
  MemoryUsage m;
  m.parameters = working_.size();
  m.gradients = grads_.size();
  m.masterWeights = master_.size() * sizeof(float);
  for (const SubGroup& group : groups_) m.optimizerStates += group.optimizer->stateBytes();
  m.buffers = groupGrads_.capacity() * sizeof(float) + layerScratch_.capacity() * sizeof(float);
  m.buffers += halfShard_.capacity();
  for (const auto& v : staging_) m.buffers += v.capacity();
  for (const auto& v : received_) m.buffers += v.capacity();
  for (const auto& v : layerParams_) m.buffers += v.capacity() * sizeof(float);
  return m;
}

}  // namespace ds::runtime
