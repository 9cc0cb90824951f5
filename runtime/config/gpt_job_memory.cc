// estimateGptJobMemory / checkGptJobMemory: see the header. Everything is in doubles: the
// products of hostile values (batch-size 1e9 x seq-length x layers) overflow 64-bit integers.
#include "runtime/config/gpt_job_memory.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "common/error.h"
#include "runtime/data/gpt_samples.h"

namespace ds::runtime {
namespace {

// GptSamples keeps a (position, offset) start and a shuffled index per sample.
constexpr double kIndexBytesPerSample = 2 * sizeof(size_t) + sizeof(uint64_t);

// Floats a block keeps for the backward pass over `samples` sequences on one of t model ranks
// (BlockActivations: the input, both normalised inputs and the attention's residual sum, replicated
// over the model ranks but for sequence parallelism; q/k/v (grouped-query: h + 2 kv wide), the
// attention's output, the MLP's two activations and two softmax statistics per row of every query
// head, sliced: flash attention keeps no [T, T] probabilities), plus the query/key norm's inputs
// (use-qk-layernorm), less the second normalised input a tied gpt-j block does not keep and the
// residual sum a gpt-j block does not make.
// A MoE layer (moe_layer.h's MoeActivations; never sliced) keeps per row its routing (a
// probability per expert, k weights and rows), k experts' rows of both activations and the
// output, DeepSpeed's residual MLP with both branches' outputs, and the router's jitter.
double mlpActivationFloats(const GptConfig& m, bool moe) {
  if (!moe) return m.ffnInputSize() + m.ffnSize();
  const MoeConfig& e = m.moe;
  const double h = m.hiddenSize;
  double f = e.numExperts + e.topK * (m.expertFfnInputSize() + m.expertFfnSize() + h + 2.0);
  if (e.kind == MoeKind::DeepSpeed && e.useResidual)
    f += m.ffnInputSize() + m.ffnSize() + 2 * h + 2;
  if ((e.kind == MoeKind::DeepSpeed && e.noisyGate == NoisyGate::Jitter) ||
      (e.kind == MoeKind::Dropless && e.router == MoeRouter::TopK && e.jitterEps > 0))
    f += h;
  return f;
}

double blockActivationFloats(const GptConfig& m, double samples, int t, int u, bool moe = false) {
  const double rows = samples * m.seqLength / u, h = m.hiddenSize;
  const double replicated =
      ((m.gptjTied ? 2 : 3) * h + (m.gptjResidual ? 0 : h) + (m.qkNorm ? 2 * h : 0)) /
      (m.sequenceParallel ? t : 1);
  const double sliced =
      (m.qkvSize() + h + mlpActivationFloats(m, moe) + (u > 1 ? h : 0)) / static_cast<double>(t);
  return rows * (replicated + sliced) + samples * m.numAttentionHeads * 2.0 * m.seqLength / t / u;
}

// The largest block's: a MoE layer's where there are any.
double largestBlockFloats(const GptConfig& m, double samples, int t, int u) {
  return std::max(blockActivationFloats(m, samples, t, u),
                  m.moe.enabled() ? blockActivationFloats(m, samples, t, u, true) : 0.0);
}

}  // namespace

double gptPassWorkspaceBytes(const GptConfig& m, double samples, bool checkpointing,
                             int modelParallel, int sequenceRanks) {
  const int t = std::max(1, modelParallel), u = std::max(1, sequenceRanks);
  const double rows = samples * m.seqLength / u, h = m.hiddenSize;
  const double vocab = m.paddedVocabSize() / static_cast<double>(t);
  // The scratch block an evaluation runs each block in (with checkpointing it is the recomputed
  // block, which the kept activations count already).
  const double scratchBlock = checkpointing ? 0.0 : largestBlockFloats(m, samples, t, u);
  // BlockWorkspace: the attention's and the MLP's outputs, two gradients of the block's rows,
  // then q/k/v's, the context's and the MLP's two gradients (sliced), and the qk norm's two.
  const double blockWork =
      rows * (4 * h + (m.qkvSize() + h + m.ffnInputSize() + m.ffnSize()) / t +
              (m.qkNorm ? 4 * h : 0));
  // The head: the final norm's output, the gradients flowing down (two), a chunk of logits, and
  // the tied embedding's gradient where the head computes it.
  const double head = rows * 3 * h + std::min(rows, 1024.0) * vocab +
                      (m.weightTying ? vocab * h : 0.0) + (checkpointing ? rows * h : 0.0);
  return (scratchBlock + blockWork + head) * sizeof(float);
}

double gptActivationBytes(const GptConfig& m, double samples, bool checkpointing,
                          int modelParallel, int sequenceRanks) {
  const int t = std::max(1, modelParallel), u = std::max(1, sequenceRanks);
  const double layers = m.numLayers;
  // A checkpointed block keeps its input: 1/t of it with sequence parallelism or
  // partition-activations.
  const double input = samples * m.seqLength / u * m.hiddenSize /
                       (m.sequenceParallel || m.partitionActivations ? t : 1);
  const double moeLayers = m.moe.moeLayers(m.numLayers);
  const double kept = checkpointing
                          ? layers * input + largestBlockFloats(m, samples, t, u)
                          : (layers - moeLayers) * blockActivationFloats(m, samples, t, u) +
                                moeLayers * blockActivationFloats(m, samples, t, u, true);
  return kept * sizeof(float);
}

namespace {

std::string count(double n) {
  char text[32];
  std::snprintf(text, sizeof text, n < 1e15 ? "%.0f" : "%.3g", n);
  return text;
}

}  // namespace

double GptJobMemory::total() const {
  // evalActivations <= trainActivations: one block of a micro-batch against at least that.
  return sampleIndex + std::max(trainActivations, evalActivations);
}

GptJobMemory estimateGptJobMemory(const GptTrainConfig& train, const BatchConfig& batch) {
  GptJobMemory e;
  const double global = static_cast<double>(batch.trainBatchSize);
  e.trainSamples = static_cast<double>(train.trainIters) * global;
  const auto splits = splitDocuments(train.split, 1000000);  // the weights, as fractions
  const bool validation =
      train.evalIters > 0 &&
      (train.blended() ? !train.validData.paths.empty() : splits[1].second > splits[1].first);
  if (validation) {
    const double evals = static_cast<double>(train.trainIters / train.evalInterval + 1);
    e.validSamples = static_cast<double>(train.evalIters) * global * evals;
    // An evaluation runs micro-batch by micro-batch and keeps only the block in hand.
    e.evalActivations = largestBlockFloats(train.model, static_cast<double>(batch.microBatchPerGpu),
                                           train.parallel.model, train.parallel.sequence) *
                        sizeof(float);
  }
  e.sampleIndex = (e.trainSamples + e.validSamples) * kIndexBytesPerSample;
  e.trainActivations =
      gptActivationBytes(train.model, static_cast<double>(batch.microBatchPerGpu),
                         train.model.checkpointActivations, train.parallel.model,
                         train.parallel.sequence);
  return e;
}

void checkGptJobMemory(const GptTrainConfig& train, const BatchConfig& batch,
                       const MemoryBudget& budget) {
  const GptJobMemory e = estimateGptJobMemory(train, batch);
  const double available = static_cast<double>(budget.availableBytes);
  if (e.total() <= available) return;
  const std::string seq = " x seq-length " + std::to_string(train.model.seqLength) + " tokens";
  std::ostringstream why;
  if (e.sampleIndex >= e.trainActivations) {
    why << "the sample index of " << count(e.trainSamples + e.validSamples)
        << " samples (train-iters " << train.trainIters << " x train_batch_size "
        << batch.trainBatchSize;
    if (e.validSamples > 0)
      why << ", plus eval-iters " << train.evalIters << " x train_batch_size per evaluation";
    why << ") needs at least " << humanBytes(e.sampleIndex)
        << "; lower train-iters, eval-iters, batch-size or gradient_accumulation_steps";
  } else {  // an evaluation's block is never more than a training step's (estimate's comment)
    why << "batch-size " << batch.microBatchPerGpu << seq << " needs at least "
        << humanBytes(e.trainActivations) << " of activations for one micro-batch ("
        << train.model.numLayers << " layers, hidden-size " << train.model.hiddenSize
        << "); lower batch-size (the micro-batch per rank; gradient_accumulation_steps keeps the "
           "global batch)"
        << (train.model.checkpointActivations ? "" : " or set checkpoint-activations: true");
  }
  throw Error("GPT job: " + why.str() + " (at least " + humanBytes(e.total()) +
              " per rank in all, but only " + humanBytes(available) + " is left under " +
              budget.source + ")");
}

}  // namespace ds::runtime
