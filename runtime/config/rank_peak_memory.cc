// estimateRankPeakMemory: see the header. The buffer terms follow the engine's allocations
// (runtime/zero/zero_stage*.cc, engine.cc): they are sized by the largest layer, the reduce and
// all-gather buckets and the largest optimizer sub-group, not by the model.
#include "runtime/config/rank_peak_memory.h"

#include <algorithm>
#include <cmath>

#include "runtime/config/gpt_job_memory.h"
#include "runtime/config/model_state_estimate.h"

namespace ds::runtime {
namespace {

double bytesOf(DType t) { return static_cast<double>(dtypeBytes(t)); }

// The largest optimizer sub-group: whole tensor slices up to sub_group_size elements, a bigger
// tensor's slice a group of its own (Engine's tensorRuns).
double largestSubGroup(const DeepSpeedConfig& c, const ModelShape& m, double shard, int world) {
  const double tensorShard = c.zero.stage == 0 ? m.largestTensor : m.largestTensor / world;
  return std::max(std::min(static_cast<double>(c.zero.subGroupSize), shard), tensorShard);
}

// Reduce-bucket staging: whole layers up to reduce_bucket_size elements, at least one layer.
double bucketElements(const DeepSpeedConfig& c, const ModelShape& m) {
  return std::max(std::min(static_cast<double>(c.zero.reduceBucketSize), m.parameters),
                  m.largestLayer);
}

double engineBuffers(const DeepSpeedConfig& c, const ModelShape& m, int world, double shard,
                     double group) {
  const DType model = c.precision.modelDtype;
  const DType grads = c.precision.gradAccumDtype.value_or(model);
  const DType comm = c.precision.communicationDtype.value_or(grads);
  const int stage = c.zero.stage;
  const double bucket = bucketElements(c, m);
  // The sub-group's fp32 gradients for the update (none where the step reads fp32 gradients in
  // place: every stage but 1, whose slices lie scattered in whole tensors), and the reduce
  // staging: a bucket and its reduced chunk, two of each at stages 2-3 (double-buffered during
  // backward), one at stages 0-1 (at the boundary), which stage 0 skips on one rank with nothing
  // to convert or pre-divide (ZeroStage::reduceBucketsAtBoundary).
  const bool gradientsInPlace = grads == DType::F32 && stage != 1;
  const bool preDivides =
      c.precision.prescaleGradients && c.precision.gradientPredivideFactor != 1.0;
  const bool staged = stage >= 1 || world > 1 || comm != grads || preDivides;
  const double slots = stage >= 2 ? 2.0 : 1.0;
  double b = gradientsInPlace ? 0.0 : 4.0 * group;
  if (staged) b += slots * bucket * bytesOf(comm);
  if (staged && stage >= 1) b += slots * bucket * bytesOf(comm) / world;  // the reduced chunks
  // The backward pass: one layer's fp32 gradient scratch, and at stages 2-3, which reduce during
  // it, the layer views and parts it packs from.
  const double backward = 4.0 * m.largestLayer + (stage >= 2 ? 3.0 * 4.0 * m.largestLayer : 0.0);
  if (stage < 3) b += backward;
  // Stages 0-2 of a 16-bit model compute on fp32 views of its layers (stage 3 gathers in fp32),
  // and stages 1-2 keep CPU-Adam's 16-bit copy of the shard.
  if (model != DType::F32 && stage < 3) b += 2.0 * 4.0 * m.largestLayer;
  if (model != DType::F32 && (stage == 1 || stage == 2)) b += shard * bytesOf(model);
  // An fp32 model's updated shard, where the master streams through NVMe slots, is copied out of
  // each slot as its group is updated, for the all-gather (Engine: convertPerGroup).
  if (model == DType::F32 && (stage == 1 || stage == 2) &&
      c.zero.offloadOptimizer.device == OffloadDevice::Nvme)
    b += shard * 4.0;
  if (stage == 3) {
    // Gathered layers in fp32, beside one layer's gather staging in the model dtype. At the end
    // of the forward: the one in use, those kept for their backward (a layer is kept when twice
    // the elements after it are within stage3_max_reuse_distance: with DeepSpeed's default 1e9
    // every layer of a model under 500M), plus, with overlap_comm, the prefetched ones
    // (stage3_prefetch_bucket_size), all within stage3_max_live_parameters. The backward drops
    // each kept layer as its gradients are packed, so its own working set and the kept layers
    // are not held at once.
    const double prefetched =
        c.zero.overlapComm ? static_cast<double>(c.zero.prefetchBucketSize) : 0.0;
    const double kept = std::min(
        m.parameters, static_cast<double>(c.zero.maxReuseDistance) / 2.0 + m.largestLayer);
    const double live =
        std::max(m.largestLayer, std::min({static_cast<double>(c.zero.maxLiveParameters),
                                           m.parameters, kept + m.largestLayer + prefetched}));
    const double inBackward = std::min(live, 2.0 * m.largestLayer);
    b += std::max(4.0 * live, backward + 4.0 * inBackward) + m.largestLayer * bytesOf(model);
    // hpZ: this rank's part of its node's secondary copy, from the forward to the step.
    if (c.zero.hpzPartitionSize > 1)
      b += m.parameters * bytesOf(model) / static_cast<double>(c.zero.hpzPartitionSize);
  }
  return b;
}

}  // namespace

ModelShape gptModelShape(const GptConfig& g, double microBatch) {
  const double h = g.hiddenSize, vocab = g.paddedVocabSize();
  const double norm = g.normWeightSize() + (g.normHasBias() ? h : 0);
  const double qkv = h * g.qkvSize() + g.qkvSize(), dense = h * h + h;
  const double fc1 = h * g.ffnInputSize() + g.ffnInputSize(), fc2 = g.ffnSize() * h + h;
  const double block = (g.gptjTied ? 1 : 2) * norm + g.qkNormParams() + qkv + dense + fc1 + fc2;
  // A MoE layer: the router and the experts in place of the MLP (DeepSpeed's residual keeps it,
  // with its coefficient).
  const MoeConfig& m = g.moe;
  const double xff = g.expertFfnSize(), xff1 = g.expertFfnInputSize();
  const bool expertBias = m.kind == MoeKind::DeepSpeed && g.biasInMlp;
  const double expert = h * xff1 + xff * h + (expertBias ? xff1 + h : 0);
  const bool residual = m.kind == MoeKind::DeepSpeed && m.useResidual;
  const double moeBlock =
      block - (residual ? -(2 * h + 2) : fc1 + fc2) + m.numExperts * (h + expert);
  const double moeLayers = m.moeLayers(g.numLayers);
  const double embed =
      vocab * h + (g.posEmb == PositionEmbedding::Learned ? g.maxPositionEmbeddings * h : 0);
  const double head = norm + (g.weightTying ? 0 : vocab * h);
  ModelShape s;
  s.parameters = embed + (g.numLayers - moeLayers) * block + moeLayers * moeBlock + head;
  s.expertParameters = moeLayers * m.numExperts * expert;
  s.expertParallel = std::max(1, m.expertParallelSize);
  s.largestLayer = std::max({embed, block, moeLayers > 0 ? moeBlock : 0.0, head});
  s.largestTensor = std::max({vocab * h, h * g.qkvSize(), h * g.ffnInputSize(), g.ffnSize() * h});
  s.activationBytes = gptActivationBytes(g, microBatch, g.checkpointActivations) +
                      gptPassWorkspaceBytes(g, microBatch, g.checkpointActivations);
  return s;
}

double RankPeakMemory::peak() const {
  return baseline + resident() + std::max({construction, buffers + activations, closingSample});
}

std::string RankPeakMemory::peakPhase() const {
  const double training = buffers + activations;
  if (construction >= training && construction >= closingSample) return "construction";
  return closingSample > training ? "closing sample" : "training";
}

double constructionTransientBytes(const DeepSpeedConfig& c, const ModelShape& model, int world,
                                  const RankPeakMemory& resident) {
  // Partitioned construction (zero.Init): each rank draws only what it keeps, straight into
  // place; a 16-bit model's values pass through a 64K-element fp32 scratch.
  const double scratch = c.precision.modelDtype == DType::F32 ? 0.0 : 4.0 * 65536;
  if (c.zero.stage != 3 || c.zero.offloadParam.device != OffloadDevice::Nvme) return scratch;
  // offload_param nvme: the working shard is drawn whole before it moves to the swap file, while
  // the gradient buffer is not touched yet (it is zeroed without a touch).
  const double shard = bytesOf(c.precision.modelDtype) * model.parameters / world;
  return scratch + std::max(0.0, shard - resident.parameters - resident.gradients);
}

double closingSampleBytes(const DeepSpeedConfig&, const ModelShape& model, int) {
  // The sample runs layer by layer through the engine (stage 3 gathers each layer when used):
  // one layer's fp32 view at most, beside what training left allocated (the caller adds it).
  return 4.0 * model.largestLayer;
}

RankPeakMemory estimateRankPeakMemory(const DeepSpeedConfig& c, const ModelShape& m, int world) {
  const DType model = c.precision.modelDtype;
  const DType grads = c.precision.gradAccumDtype.value_or(model);
  const double stateBytes =
      optimizerStateBytesPerParameter(c.optimizer.value_or(OptimizerConfig{}));
  const int stage = c.zero.stage;
  // The experts are a partition of their own: 1 / ep of them on each rank, over the ep-th part of
  // the world (the expert-data group).
  const ModelStateEstimate dense =
      estimateModelState(stage, model, grads, m.parameters - m.expertParameters, world, stateBytes);
  const ModelStateEstimate experts =
      estimateModelState(stage, model, grads, m.expertParameters / m.expertParallel,
                         std::max(1, world / m.expertParallel), stateBytes);
  ModelStateEstimate e = dense;
  e.parameters += experts.parameters;
  e.gradients += experts.gradients;
  e.masterWeights += experts.masterWeights;
  e.optimizerStates += experts.optimizerStates;
  const double shard = stage == 0 ? m.parameters : m.parameters / world;
  const double group = largestSubGroup(c, m, shard, world);
  RankPeakMemory r;
  r.baseline = kProcessBaselineBytes;
  r.parameters = e.parameters;
  r.gradients = e.gradients;
  if (c.zero.offloadOptimizer.device == OffloadDevice::Nvme) {
    const double groups = std::ceil(shard / std::max(1.0, group));
    r.swapSlots = std::min(static_cast<double>(c.zero.offloadOptimizer.bufferCount), groups) *
                  group * swapSlotBytesPerElement(e, stateBytes);
  } else {
    r.masterWeights = e.masterWeights;
    r.optimizerStates = e.optimizerStates;
  }
  // A 1-bit optimizer's error feedback (stage 0: over the whole model), beside its moments.
  r.optimizerStates +=
      oneBitFeedbackBytesPerParameter(c.optimizer.value_or(OptimizerConfig{}), world) *
      m.parameters;
  if (stage == 3 && c.zero.offloadParam.device == OffloadDevice::Nvme) {
    // The shard lives in the swap file but for max_in_cpu elements and the buffer_count buffers
    // its layers are read into (ParamSwapper's slots: each holds buffer_size elements or the
    // largest layer shard where that is smaller, and a pass through the layers fills them all).
    const OffloadParamConfig& p = c.zero.offloadParam;
    const double inCpu = std::min(static_cast<double>(p.maxInCpu), shard);
    const double buffer = std::min(static_cast<double>(p.bufferSize), m.largestLayer / world);
    r.parameters =
        bytesOf(model) * std::min(shard, inCpu + static_cast<double>(p.bufferCount) * buffer);
  }
  r.buffers = engineBuffers(c, m, world, shard, group);
  r.activations = m.activationBytes;
  r.construction = constructionTransientBytes(c, m, world, r);
  // The trainer skips its closing sample where layers live in the swap file (each token would
  // read them all again).
  const bool layersSwapped = stage == 3 && c.zero.offloadParam.device == OffloadDevice::Nvme &&
                             static_cast<double>(c.zero.offloadParam.maxInCpu) < shard;
  if (!layersSwapped) r.closingSample = r.buffers + r.activations + closingSampleBytes(c, m, world);
  return r;
}

}  // namespace ds::runtime
