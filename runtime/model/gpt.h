// A decoder-only transformer language model with GPT-NeoX's options (runtime/model/gpt_config.h),
// trained through the engine's LayerAccess like any Model. Layers, as the engine sees them:
//   0            embedding: word embeddings [vocab, hidden] (+ learned positions [positions,
//   hidden]) 1..L         transformer blocks: norm, QKV, causal attention, dense, norm, MLP,
//   residuals L + 1        head: final norm (+ untied output matrix [vocab, hidden]); the loss is
//   the mean
//                cross-entropy of the positions' targets, a negative target (NeoX's label -100)
//                masked: out of the loss and of the mean
// With tied weights the head reads the word embeddings again (it acquires layer 0) and its share
// of their gradient is added to layer 0's at the end of the backward pass.
// A pipeline stage's Gpt (GptPlacement's [firstLayer, endLayer)) holds only those layers, numbered
// from 0 for the engine, and runs through the PipelineStage interface; with tied weights and the
// head apart from the embedding, the head holds its own copy of the word embeddings under the
// same name (DeepSpeed's TiedLayerSpec: same initial values, gradients summed by the engine).
// Compute is fp32 on the accelerator the Gpt is built with (kernels/accelerator.h; the CPU
// backend by default): matrix products through its gemm, the rest through its transformer-kernel
// table, and every buffer of a pass (activations, token ids, the rotary and position tables) in
// its device memory, as are the parameters and gradients the LayerAccess hands out (a stage's
// boundary tensors too). Options whose passes still touch buffers from host code are refused on a
// device the host cannot read (refuseHostOnlyOptions). Not here: tokenisation, data, the training
// loop.
// Tensor slicing (GptPlacement::modelSize t > 1, Megatron's layout): the rank holds its heads,
// MLP columns and vocabulary rows; parameters keep the full model's names with their LOCAL
// shapes, ParamSpec::slice says where their elements sit in the full tensors, and they initialise
// to those elements of the one-rank tensors (docs in gpt.cc).
#pragma once

#include <limits>
#include <memory>
#include <vector>

#include "kernels/accelerator.h"
#include "runtime/model/gpt_config.h"
#include "runtime/model/gpt_placement.h"
#include "runtime/model/model.h"
#include "runtime/profiler/flops_profiler.h"

namespace ds::runtime {

class GptActivations;
struct GptBuffer;
namespace gpt {
struct MoeStatistics;
}
struct GptPass;

class Gpt : public Model, public PipelineStage {
 public:
  // Throws ds::Error (config.validate(), a placement outside the model's layers, and at model size
  // > 1 what slicing refuses, by key). At model size t > 1 the vocabulary is padded to
  // make-vocab-size-divisible-by x t, as NeoX does, and config() reports that multiple.
  // Every product and kernel of its passes runs on `accelerator`, which must outlive it.
  explicit Gpt(GptConfig config, GptPlacement placement = {},
               kernels::Accelerator& accelerator = kernels::accelerator(DeviceKind::Cpu));
  ~Gpt() override;

  const std::vector<ParamSpec>& parameters() const override { return specs_; }
  // The stage's layers [first, end) (0 the embedding, 1..L the blocks, L + 1 the head), then
  // one layer per MoE block of the stage holding its experts (expertLayer).
  int layerCount() const override { return layers_; }
  std::string architecture() const override { return config_.architecture(); }
  void initTensorRange(const ParamSpec& spec, float* values, uint64_t seed, size_t begin,
                       size_t end) const override;
  float forwardBackward(const Batch& batch, LayerAccess& access, float gradScale) override;

  // Mean loss of the batch without gradients or dropout (evaluation): acquires and releases
  // every layer, asks for no gradients.
  float evaluate(const Batch& batch, LayerAccess& access) override;
  // Next-token logits (paddedVocabSize values) after `tokens` (1..maxPositions of them); sliced,
  // every model rank gets all of them (collective over the model group).
  std::vector<float> nextTokenLogits(const std::vector<int32_t>& tokens, LayerAccess& access);

  // The pipeline stage this Gpt is, when it holds fewer than all layers.
  PipelineStage* pipelineStage() override { return whole() ? nullptr : this; }
  bool firstStage() const override { return first_ == 0; }
  bool lastStage() const override { return end_ == config_.numLayers + 2; }
  size_t boundaryElements(const Batch& batch) const override;
  void setPipeBuffers(int buffers) override;
  float stageForward(int buffer, const Batch& batch, const float* input, float* output,
                     LayerAccess& access, float gradScale, bool train) override;
  void stageBackward(int buffer, const float* outputGrad, float* inputGrad,
                     LayerAccess& access) override;
  std::vector<std::string> tiedParameters() const override;
  // The layers held, in the full model's numbering: [firstLayer, endLayer).
  int firstLayer() const { return first_; }
  int endLayer() const { return end_; }

  const GptConfig& config() const { return config_; }
  const GptPlacement& placement() const { return placement_; }
  kernels::Accelerator& accelerator() const { return *acc_; }
  kernels::Accelerator* deviceMemory() const override {
    return acc_->hostAccessible() ? nullptr : acc_;
  }
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
  // A training step's model flops per token: forward and backward, 3 x 2 x the forward MACs, as
  // DeepSpeed's profiler and Megatron's MFU count them (a recomputed forward is not counted).
  double trainingFlopsPerToken(size_t seq) const {
    return 6.0 * forwardMacsPerSample(seq).total() / static_cast<double>(seq);
  }

  // Mixture of experts over the training passes since the last call (the iteration line): the
  // mean per pass of moe-loss-coeff x the layers' summed l_aux (DeepSpeed's gating), the fewest
  // and most choices any expert of any layer received in a pass, and the choices dropped past
  // capacity. This rank's passes only.
  struct MoeWindow {
    double moeLoss = 0.0;
    uint32_t minTokens = std::numeric_limits<uint32_t>::max(), maxTokens = 0;
    size_t dropped = 0, passes = 0;
  };
  MoeWindow takeMoeWindow();

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
  // On an accelerator whose memory host code cannot touch: throws ds::Error naming the first
  // configured option whose passes still do.
  void refuseHostOnlyOptions() const;
  // The pieces of a pass, in order; the stage API runs the ones its layers hold.
  GptPass beginPass(const Batch& batch, Pass pass);
  float* blockInput(GptBuffer& buffer, size_t rows);  // where the stage's first layer input goes
  // Points the pass at the batch's token ids in device memory (B's), copying them there first
  // when `upload`.
  void deviceIds(GptPass& pass, GptBuffer& buffer, bool upload);
  void embedForward(GptPass& pass, LayerAccess& access, float* x);
  void blocksForward(GptPass& pass, GptBuffer& buffer, LayerAccess& access);
  float headPass(GptPass& pass, GptBuffer& buffer, LayerAccess& access, float gradScale,
                 std::vector<float>* lastLogits);
  void blocksBackward(GptPass& pass, GptBuffer& buffer, LayerAccess& access);
  void embedBackward(GptPass& pass, LayerAccess& access);
  bool whole() const { return first_ == 0 && end_ == config_.numLayers + 2; }
  // Adds one MoE layer's training forward to the window (blocksForward counts the passes).
  void countMoe(const gpt::MoeStatistics& s);
  // Ulysses: this rank's positions of every sample of `batch` (kept in the activations).
  const Batch& ulyssesBatch(const Batch& batch, Communicator& group);
  int local(int layer) const { return layer - first_; }  // the engine's number of a layer
  // The engine's number of MoE block l's experts' layer (-1 for a dense block).
  int expertLayer(size_t block) const { return expertLayer_.at(block); }
  // The group a sliced pass all-reduces over; null at model size 1 (the unsliced code).
  Communicator* modelGroup() const { return placement_.modelSize > 1 ? placement_.model : nullptr; }

  GptConfig config_;
  GptPlacement placement_;
  kernels::Accelerator* acc_;
  int first_ = 0, end_ = 0;            // layers held, full numbering
  int blockBegin_ = 0, blockEnd_ = 0;  // blocks held, 0-based
  int layers_ = 0;                     // layerCount()
  std::vector<int> expertLayer_;       // per block: its experts' layer, -1 for a dense one
  bool tiedCopy_ = false;              // the head holds its own copy of the tied word embeddings
  std::vector<ParamSpec> specs_;
  std::vector<std::vector<int64_t>> fullShapes_;  // by spec: the one-rank shape (init's fans)
  std::unique_ptr<GptActivations> acts_;
  bool profiling_ = false;
  MoeWindow moeWindow_;
  std::vector<double> moduleSeconds_;  // by profileModules() index
};

}  // namespace ds::runtime
