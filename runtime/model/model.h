// Model: what the engine needs from a model. Parameters are described by a table (name, shape,
// weight decay, layer) laid out back to back in a flat buffer; the model runs layer by layer and
// asks the engine, through LayerAccess, for each layer's parameters right before using them and
// for a place to put each layer's gradients right after its backward. That is where ZeRO gathers
// (stage 3) and reduces (stages 2 and 3) without the model knowing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/slice_map.h"

namespace ds::kernels {
class Accelerator;
}

namespace ds::runtime {

struct ParamSpec {
  std::string name;
  std::vector<int64_t> shape;
  bool weightDecay = true;  // biases and norms are conventionally excluded
  size_t offset = 0;        // element offset in the flat buffer
  size_t numel = 0;
  int layer = 0;  // the layer that uses it; layers own consecutive runs of the table
  // Whether its gradient enters the global gradient norm on this rank. False for a copy that
  // another rank of the model or pipe groups also holds and counts: a tensor replicated across
  // model-parallel ranks (norms, row-parallel biases) on every model rank but the first, a tied
  // embedding's second copy on the last pipeline stage. Overflow is checked on every copy.
  bool countInGradNorm = true;
  // Tensor slicing: where this rank's elements sit in the full (one-rank) tensor; fullNumel 0
  // means the whole tensor. Checkpoints record it to reshard at another model-parallel size.
  SliceMap slice = {};
  // A MoE expert's tensor: with expert parallelism each rank holds its experts' only, and the
  // engine reduces and partitions them over the expert-data-parallel group, not the data group.
  // Expert tensors make up whole layers.
  bool expert = false;
  SliceMap fullSlice() const { return slice.fullNumel == 0 ? SliceMap{numel, {}} : slice; }
};

// A micro-batch of `size` samples. Regression models (the MLP) read inputs/targets: inputDim and
// targetDim floats per sample, row-major. Language models read token ids: seq inputs per sample
// and the same tokens shifted by one as targets, plus each sample's global index, which keys its
// dropout masks (so they do not depend on which rank a sample lands on).
struct Batch {
  size_t size = 0;
  std::vector<float> inputs;
  std::vector<float> targets;
  std::vector<int32_t> inputIds;
  std::vector<int32_t> targetIds;
  std::vector<uint64_t> sampleIds;
};

// The engine's side of one forward/backward. Pointers address the layer's first parameter
// element; a parameter's elements sit at (spec.offset - first spec of the layer's offset).
class LayerAccess {
 public:
  virtual ~LayerAccess() = default;
  // fp32 parameters of `layer`, valid until the matching release (forward) or gradientsDone.
  virtual const float* acquireParameters(int layer) = 0;
  virtual void releaseParameters(int layer) = 0;
  // fp32 gradient scratch for `layer`, zeroed; the model adds d(loss * gradScale)/d(param).
  virtual float* layerGradients(int layer) = 0;
  // The layer's backward is finished: its gradients may be reduced and its parameters released.
  virtual void gradientsDone(int layer) = 0;
};

class PipelineStage;

class Model {
 public:
  virtual ~Model() = default;

  virtual const std::vector<ParamSpec>& parameters() const = 0;
  virtual int layerCount() const = 0;
  // Everything about the whole model (not only this rank's stage or slice) that shapes a tensor
  // or what its values mean, as one line of "key=value" pairs: checkpoints record it, and a
  // checkpoint saved from another architecture is refused where a resume would mix them.
  virtual std::string architecture() const = 0;
  size_t parameterCount() const {
    const auto& specs = parameters();
    return specs.empty() ? 0 : specs.back().offset + specs.back().numel;
  }
  // Writes elements [begin, end) of one tensor of parameters()'s initial values (`values`: element
  // begin, host memory whatever the model computes on). Each element is a pure function of (seed,
  // tensor, element index), so any cut of a tensor into ranges gives, concatenated, the same values
  // as one whole draw.
  virtual void initTensorRange(const ParamSpec& spec, float* values, uint64_t seed, size_t begin,
                               size_t end) const = 0;
  // Writes the initial values of one whole tensor (`values`: its first element): the range of all
  // its elements.
  virtual void initTensor(const ParamSpec& spec, float* values, uint64_t seed) const {
    initTensorRange(spec, values, seed, 0, spec.numel);
  }
  // Writes the initial values of all parameters (flat layout), identical for the same seed.
  void initParameters(float* params, uint64_t seed) const {
    for (const ParamSpec& spec : parameters()) initTensor(spec, params + spec.offset, seed);
  }
  // Forward layers 0..L-1, then backward L-1..0, through `access`. Returns the batch's mean loss;
  // gradients are of loss * gradScale.
  virtual float forwardBackward(const Batch& batch, LayerAccess& access, float gradScale) = 0;
  // The batch's mean loss without gradients or dropout (evaluation); asks for no gradients.
  virtual float evaluate(const Batch& batch, LayerAccess& access);
  // The model's pipeline-stage side when it holds one stage of a deeper pipeline; null for a
  // model that holds every layer (the engine then runs forwardBackward).
  virtual PipelineStage* pipelineStage() { return nullptr; }
  // The device whose memory the model's passes take parameters and gradients in, where host code
  // cannot touch it (the engine then hands each layer over through it:
  // runtime/engine/device_layer_bridge.h); null where they are host memory.
  virtual kernels::Accelerator* deviceMemory() const { return nullptr; }
};

// One stage of a pipeline (DeepSpeed's PipelineModule on one rank), driven micro-batch by
// micro-batch by the engine's pipe schedule. A stage keeps the activations of up to `buffers`
// micro-batches between their forward and backward (the schedule's pipe buffers). Activations
// crossing a stage boundary are one float tensor of boundaryElements(batch) values, and so are
// their gradients. The batch given to a forward is the whole micro-batch on every stage: the first
// stage reads its tokens, the last its targets, every stage its shape and the sample ids that key
// dropout (so masks do not depend on where a layer runs).
class PipelineStage {
 public:
  virtual ~PipelineStage() = default;
  virtual bool firstStage() const = 0;  // holds the input layer: reads batch tokens
  virtual bool lastStage() const = 0;   // holds the loss: reads batch targets
  virtual size_t boundaryElements(const Batch& batch) const = 0;
  // Sizes the kept activations for `buffers` micro-batches in flight (ids 0..buffers-1).
  virtual void setPipeBuffers(int buffers) = 0;
  // Forward of one micro-batch into pipe buffer `buffer`. `input`: the previous stage's
  // activations (ignored on the first stage); `output`: where the activations for the next stage
  // go (unused on the last). Returns the micro-batch's mean loss on the last stage (0 elsewhere).
  // train: keeps what the backward needs (dropout on); the last stage also computes its head's
  // gradients here, of loss * gradScale. Not training: no gradients are asked for.
  virtual float stageForward(int buffer, const Batch& batch, const float* input, float* output,
                             LayerAccess& access, float gradScale, bool train) = 0;
  // Backward of the micro-batch in `buffer`: `outputGrad` is the next stage's gradient of its
  // input (ignored on the last stage, whose loss started it), `inputGrad` receives this stage's
  // (unused on the first stage). Parameter gradients go through `access` as in forwardBackward.
  virtual void stageBackward(int buffer, const float* outputGrad, float* inputGrad,
                             LayerAccess& access) = 0;
  // Tensors this stage shares with the pipeline's other end (DeepSpeed's tied modules): their
  // gradients are summed between the first and last stage before the step.
  virtual std::vector<std::string> tiedParameters() const { return {}; }
};

}  // namespace ds::runtime
