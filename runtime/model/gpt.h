// A decoder-only transformer language model with GPT-NeoX's options (runtime/model/gpt_config.h),
// trained through the engine's LayerAccess like any Model. Layers, as the engine sees them:
//   0            embedding: word embeddings [vocab, hidden] (+ learned positions [positions, hidden])
//   1..L         transformer blocks: norm, QKV, causal attention, dense, norm, MLP, residuals
//   L + 1        head: final norm (+ untied output matrix [vocab, hidden]); the loss is the mean
//                cross-entropy of the positions' targets, a negative target (NeoX's label -100)
//                masked: out of the loss and of the mean
// With tied weights the head reads the word embeddings again (it acquires layer 0) and its share
// of their gradient is added to layer 0's at the end of the backward pass.
// Compute is fp32: matrix products through kernels/cpu/matmul.h, the rest through the fused
// kernels of kernels/cpu/transformer_kernels.h. Not here: tokenisation, data, the training loop.
#pragma once

#include <memory>
#include <vector>

#include "runtime/model/gpt_config.h"
#include "runtime/model/model.h"
#include "runtime/profiler/flops_profiler.h"

namespace ds::runtime {

class GptActivations;

class Gpt : public Model {
 public:
  explicit Gpt(GptConfig config);  // throws ds::Error (config.validate())
  ~Gpt() override;

  const std::vector<ParamSpec>& parameters() const override { return specs_; }
  int layerCount() const override { return config_.numLayers + 2; }
  void initTensorRange(const ParamSpec& spec, float* values, uint64_t seed, size_t begin,
                       size_t end) const override;
  float forwardBackward(const Batch& batch, LayerAccess& access, float gradScale) override;

  // Mean loss of the batch without gradients or dropout (evaluation): acquires and releases
  // every layer, asks for no gradients.
  float evaluate(const Batch& batch, LayerAccess& access) override;
  // Next-token logits (paddedVocabSize values) after `tokens` (1..maxPositions of them).
  std::vector<float> nextTokenLogits(const std::vector<int32_t>& tokens, LayerAccess& access);

  const GptConfig& config() const { return config_; }
  int maxPositions() const;  // the longest sequence the position tables cover
  // Activation memory: bytes held by the buffers kept for the backward pass, at most so far.
  size_t peakActivationBytes() const;
  // Multiply-accumulates of one sample's forward pass, by what computes them (for the flops
  // profiler and throughput figures).
  struct Macs {
    double attentionProjections = 0, attentionScores = 0, mlp = 0, head = 0;
    double total() const { return attentionProjections + attentionScores + mlp + head; }
  };
  Macs forwardMacsPerSample(size_t seq) const;

  // The flops profiler: while on, each pass adds every module's forward latency to the table
  // profileModules() returns (cleared by turning it on).
  void setProfiling(bool on);
  // The module tree with params, forward MACs for `samples` x `seq` tokens and the latencies
  // measured since profiling was turned on.
  std::vector<ModuleProfile> profileModules(size_t samples, size_t seq) const;

 private:
  enum class Pass { Train, Evaluate, Logits };
  float run(const Batch& batch, LayerAccess& access, float gradScale, Pass pass,
            std::vector<float>* lastLogits);
  void checkBatch(const Batch& batch, size_t& seq) const;

  GptConfig config_;
  std::vector<ParamSpec> specs_;
  std::unique_ptr<GptActivations> acts_;
  bool profiling_ = false;
  std::vector<double> moduleSeconds_;  // by profileModules() index
};

}  // namespace ds::runtime
