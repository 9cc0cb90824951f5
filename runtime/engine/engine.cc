// Engine: gradient averaging, clipping, the optimizer update and (stage 1) the partition gather.
#include "runtime/engine/engine.h"

#include <algorithm>
#include <cmath>

#include "runtime/common/error.h"

namespace ds::runtime {

Engine::Engine(Model& model, const DeepSpeedConfig& config, Communicator& comm, uint64_t seed)
    : model_(model), config_(config), comm_(comm), count_(model.parameterCount()) {
  if (config_.zeroStage != 0 && config_.zeroStage != 1)
    throw Error("zero_optimization.stage: this engine runs stages 0 and 1, got " +
                std::to_string(config_.zeroStage));
  const size_t world = static_cast<size_t>(comm_.size());
  partitionSize_ = config_.zeroStage == 1 ? (count_ + world - 1) / world : count_;
  // Padded to a multiple of the world size in every stage: the all_reduce then splits the buffer
  // the same way whatever the stage, so stage 0 and 1 sum every element in the same order.
  const size_t padded = (count_ + world - 1) / world * world;
  params_.assign(padded, 0.0f);
  grads_.assign(padded, 0.0f);
  model_.initParameters(params_.data(), seed);
  // Rank 0's initial values are the truth, as DeepSpeed broadcasts the model at initialize().
  comm_.broadcast(params_.data(), count_, 0);

  const OptimizerConfig optimizer = config_.optimizer.value_or(OptimizerConfig{});
  const size_t begin = config_.zeroStage == 1 ? partitionSize_ * comm_.rank() : 0;
  optimizer_ =
      std::make_unique<Adam>(optimizer.params, model_.parameters(), begin, begin + partitionSize_);
  lr_ = optimizer.params.lr;
  if (config_.scheduler) {
    scheduler_.emplace(config_.scheduler->warmupLr);
    lr_ = scheduler_->lr();
  }
}

float Engine::forwardBackward(const Batch& batch) {
  const float scale = 1.0f / static_cast<float>(config_.batch.gradientAccumulationSteps);
  return model_.forwardBackward(params_.data(), grads_.data(), batch, scale);
}

void Engine::clipGradients() {
  double sumSquares = 0.0;
  for (size_t i = 0; i < count_; ++i) sumSquares += static_cast<double>(grads_[i]) * grads_[i];
  lastGradNorm_ = std::sqrt(sumSquares);
  const double maxNorm = config_.gradientClipping;
  if (maxNorm <= 0.0) return;
  const double coefficient = maxNorm / (lastGradNorm_ + 1e-6);
  if (coefficient >= 1.0) return;
  const float c = static_cast<float>(coefficient);
  for (size_t i = 0; i < count_; ++i) grads_[i] *= c;
}

bool Engine::step() {
  if (++microSteps_ % config_.batch.gradientAccumulationSteps != 0) return false;

  // Sum over ranks, then divide: the mean gradient of the global batch. The ring all-reduce gives
  // every rank the same bits, so the updates below stay identical across replicas.
  comm_.allReduce(grads_.data(), grads_.size());
  const float invWorld = 1.0f / static_cast<float>(comm_.size());
  for (auto& g : grads_) g *= invWorld;
  clipGradients();

  if (config_.zeroStage == 1) {
    const size_t begin = partitionSize_ * comm_.rank();
    optimizer_->step(params_.data() + begin, grads_.data() + begin, lr_);
    shardScratch_.assign(params_.begin() + begin, params_.begin() + begin + partitionSize_);
    comm_.allGather(shardScratch_.data(), params_.data(), partitionSize_);
  } else {
    optimizer_->step(params_.data(), grads_.data(), lr_);
  }
  std::fill(grads_.begin(), grads_.end(), 0.0f);
  ++globalSteps_;
  if (scheduler_) {
    scheduler_->step();
    lr_ = scheduler_->lr();
  }
  return true;
}

uint64_t Engine::parameterHash() const {
  uint64_t hash = 0xcbf29ce484222325ULL;
  const auto* bytes = reinterpret_cast<const unsigned char*>(params_.data());
  for (size_t i = 0; i < count_ * sizeof(float); ++i) {
    hash ^= bytes[i];
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

size_t Engine::modelStateBytes() const {
  return (params_.size() + grads_.size()) * sizeof(float) + optimizer_->stateBytes();
}

}  // namespace ds::runtime
