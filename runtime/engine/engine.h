// Engine: data-parallel training of a Model with ZeRO stage 0 or 1 on flat fp32 buffers.
// The caller runs forwardBackward() once per micro-batch and step() after each; step() applies an
// update only at a gradient-accumulation boundary (every gradient_accumulation_steps calls), as
// DeepSpeed's engine.step() does.
//   stage 0: gradients all-reduced; every rank keeps optimizer state for all parameters.
//   stage 1: optimizer state kept only for this rank's partition; updated partitions all-gathered.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "runtime/comm/communicator.h"
#include "runtime/config/ds_config.h"
#include "runtime/lr/warmup_lr.h"
#include "runtime/model/model.h"
#include "runtime/optim/adam.h"

namespace ds::runtime {

class Engine {
 public:
  Engine(Model& model, const DeepSpeedConfig& config, Communicator& comm, uint64_t seed);

  // One micro-batch: returns its mean loss and accumulates gradients scaled by 1/grad_accum.
  float forwardBackward(const Batch& batch);
  // Returns true when an optimizer update was applied (an accumulation boundary).
  bool step();

  const float* parameters() const { return params_.data(); }
  size_t parameterCount() const { return count_; }
  // FNV-1a over the parameter bytes: equal on every rank when replicas are bitwise identical.
  uint64_t parameterHash() const;

  int64_t globalSteps() const { return globalSteps_; }
  int64_t globalSamples() const { return globalSteps_ * config_.batch.trainBatchSize; }
  double lr() const { return lr_; }
  double lastGradNorm() const { return lastGradNorm_; }
  // Bytes of model state this rank holds (parameters, gradients, optimizer state).
  size_t modelStateBytes() const;

 private:
  void clipGradients();

  Model& model_;
  DeepSpeedConfig config_;
  Communicator& comm_;
  size_t count_;               // real parameter count
  size_t partitionSize_;       // stage 1: ceil(count / world); stage 0: count
  std::vector<float> params_;  // padded to partitionSize_ * world at stage 1
  std::vector<float> grads_;
  std::vector<float> shardScratch_;
  std::unique_ptr<Adam> optimizer_;
  std::optional<WarmupLr> scheduler_;
  double lr_;
  int64_t microSteps_ = 0;
  int64_t globalSteps_ = 0;
  double lastGradNorm_ = 0.0;
};

}  // namespace ds::runtime
