// The GPT's pass pieces (see gpt.cc): the embedding forward and backward, the blocks' forward and
// backward (with activation checkpointing's recomputation), the head with its fused
// cross-entropy, and Ulysses' share of a batch. Megatron's sequence parallelism shards the rows
// between the embedding and the head (sequence_parallel.h).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/error.h"
#include "kernels/cpu/kernel_timers.h"
#include "kernels/cpu/transformer_kernels.h"
#include "runtime/model/gpt.h"
#include "runtime/model/gpt_pass.h"
#include "runtime/model/row_kernels.h"
#include "runtime/model/sequence_parallel.h"
#include "runtime/parallel/vocab_parallel_cross_entropy.h"
#include "runtime/parallel/vocab_parallel_embedding.h"

namespace ds::runtime {

using namespace gpt_pass;

const Batch& Gpt::ulyssesBatch(const Batch& batch, Communicator& group) {
  size_t seq = 0;
  checkBatch(batch, seq);
  const size_t u = static_cast<size_t>(group.size()), mine = seq / u;
  if (seq % u != 0)
    throw Error("sequence_parallel_size " + std::to_string(u) + ": a sample of " +
                std::to_string(seq) + " tokens does not split evenly over the sequence ranks");
  Batch& local = acts_->ulysses;
  local.size = batch.size;
  local.sampleIds = batch.sampleIds;
  local.inputIds.clear();
  local.targetIds.clear();
  const size_t first = mine * static_cast<size_t>(group.rank());
  for (size_t b = 0; b < batch.size; ++b) {
    const auto from = static_cast<std::ptrdiff_t>(b * seq + first);
    const auto to = from + static_cast<std::ptrdiff_t>(mine);
    local.inputIds.insert(local.inputIds.end(), batch.inputIds.begin() + from,
                          batch.inputIds.begin() + to);
    if (!batch.targetIds.empty())
      local.targetIds.insert(local.targetIds.end(), batch.targetIds.begin() + from,
                             batch.targetIds.begin() + to);
  }
  return local;
}

void Gpt::embedForward(GptPass& P, LayerAccess& access, float* out) {
  GptActivations& A = *acts_;
  const kernels::TransformerKernels& k = acc_->transformerKernels();
  const size_t h = config_.hiddenSize, vocab = config_.paddedVocabSize(), seq = P.seq;
  const size_t N = P.shape.rows;
  const Batch& batch = P.batch;
  Communicator* model = modelGroup();
  const bool learnedPositions = config_.posEmb == PositionEmbedding::Learned;
  const float* fixedPositions =
      config_.posEmb == PositionEmbedding::Sinusoidal ? A.sinusoid.data() : nullptr;
  const float* p = access.acquireParameters(local(0));
  kernels::KernelTimer timer(kernels::KernelFamily::EmbeddingLoss);
  // Sequence parallel: every row here, then the rank keeps its own (NeoX scatters after dropout).
  float* x = P.shape.sequence ? sized(*acc_, A.embedded, N * h) : out;
  const size_t firstPosition = P.shape.positionOffset;  // Ulysses: the rank's first position
  if (!model) {
    k.embeddingForward(x, P.inputIds, p,
                       learnedPositions ? p + (vocab + firstPosition) * h
                       : fixedPositions ? fixedPositions + firstPosition * h
                                        : nullptr,
                       N, seq, h);
  } else {  // this rank's vocabulary rows; the positions follow them
    vocabParallelEmbeddingForward(*model, A.vocab, p, batch.inputIds.data(), N, h, x);
    if (const float* pos = learnedPositions ? p + A.vocab.rows.count * h : fixedPositions)
      for (size_t r = 0; r < N; ++r) k.add(x + r * h, pos + (r % seq) * h, h);
  }
  if (const auto* key = P.dropoutFor(0); key && config_.hiddenDropout > 0)
    gpt::applyDropoutRows(x, P.embeddedRows(), h, static_cast<float>(config_.hiddenDropout), *key,
                          0, *acc_);
  if (P.shape.sequence)
    acc_->copy(out, x + P.shape.firstRow * h, P.shape.local * h * sizeof(float),
               kernels::CopyKind::DeviceToDevice, acc_->currentStream());
  timer.stop();
  access.releaseParameters(local(0));
  if (P.times) P.times[kEmbedModule] += since(P.forwardStart);
}

// Blocks: each writes the next one's input (the last writes B.last).
void Gpt::blocksForward(GptPass& P, GptBuffer& B, LayerAccess& access) {
  GptActivations& A = *acts_;
  const size_t h = config_.hiddenSize, N = P.shape.rows, n = P.shape.local;
  const size_t first = static_cast<size_t>(blockBegin_), L = static_cast<size_t>(blockEnd_);
  double* times = P.times;
  // partition-activations: a checkpointed block keeps 1/t of its input on each model rank (with
  // sequence parallelism every kept input already is the rank's 1/t).
  Communicator* model = modelGroup();
  const bool partitioned =
      P.checkpointing && model && config_.partitionActivations && !P.shape.sequence;
  for (size_t l = first; l < L; ++l) {
    const int layer = local(static_cast<int>(l + 1)), experts = expertLayer(l);
    const gpt::BlockTensors<const float> p(
        access.acquireParameters(layer), experts < 0 ? nullptr : access.acquireParameters(experts));
    BlockActivations& kept = B.blocks[l - first];
    // Without a backward to come (evaluation, generation) nothing is kept beyond the block in
    // hand: each runs in the one scratch block, its input moved in and freed from the buffer, so
    // an evaluation never needs more than a training step of the same micro-batch.
    BlockActivations& a = P.checkpointing || !P.train ? A.recompute : kept;
    if (!P.train) {
      a.input.swap(kept.input);
      kept.input.release();
    } else if (P.checkpointing) {
      kernels::assignDevice(*acc_, a.input, kept.input.data(), kept.input.size());
      if (partitioned) {  // keep this rank's chunk of the input only (gathered in backward)
        const size_t chunk = N * h / static_cast<size_t>(model->size());
        kernels::DeviceArray<float> mine;
        kernels::assignDevice(*acc_, mine, kept.input.data() + chunk * model->rank(), chunk);
        mine.swap(kept.input);
      }
    }
    float* out = sized(*acc_, l + 1 < L ? B.blocks[l + 1 - first].input : B.last, n * h);
    const Clock::time_point blockStart = Clock::now();
    A.runnerFor(l).forward(p, a, A.work, P.shape, out, P.dropoutFor(l + 1),
                           times ? times + blockModule(l) : nullptr);
    if (P.train && config_.moe.isMoeLayer(static_cast<int>(l))) countMoe(a.moe.stats);
    if (times) times[blockModule(l) + gpt::BlockRunner::kLayer] += since(blockStart);
    if (experts >= 0) access.releaseParameters(experts);
    access.releaseParameters(layer);
  }
  if (P.train && config_.moe.enabled()) ++moeWindow_.passes;
  size_t bytes = 0;
  for (const GptBuffer& buffer : A.buffers) {
    for (const auto& b : buffer.blocks) bytes += b.bytes();
    bytes += buffer.last.capacity() * sizeof(float);
  }
  bytes += A.recompute.bytes();
  A.peakBytes = std::max(A.peakBytes, bytes);
}

// Head: final norm, logits chunk by chunk, cross-entropy and (training) its backward at once,
// leaving d(loss * gradScale)/d(B.last) in A.dy.
float Gpt::headPass(GptPass& P, GptBuffer& B, LayerAccess& access, float gradScale,
                    std::vector<float>* lastLogits) {
  GptActivations& A = *acts_;
  const kernels::TransformerKernels& k = acc_->transformerKernels();
  const size_t h = config_.hiddenSize, vocab = config_.paddedVocabSize(), L = config_.numLayers;
  const size_t N = P.shape.rows;
  const bool train = P.train;
  const Batch& batch = P.batch;
  double* times = P.times;
  // The output matrix is the embedding's (layer 0) only where this rank holds both.
  const bool tiedHere = config_.weightTying && !tiedCopy_;
  // Sliced: this rank's vocabulary rows of the output layer, its columns of the logits.
  Communicator* model = modelGroup();
  const size_t localVocab = A.vocab.rows.count;
  const int head = local(static_cast<int>(L + 1));
  const float* hp = access.acquireParameters(head);
  const size_t normWeights = static_cast<size_t>(config_.normWeightSize());
  const size_t headNormNumel = normWeights + (config_.normHasBias() ? h : 0);
  const Clock::time_point headStart = Clock::now();
  const float* fw = hp;
  const float* fbias = config_.normHasBias() ? hp + normWeights : nullptr;
  const size_t n = P.shape.local;  // the final norm's rows (all N but with sequence parallelism)
  A.runner.norm(B.last.data(), fw, fbias, sized(*acc_, A.finalNorm, n * h), sized(*acc_, A.fa, n),
                sized(*acc_, A.fb, n), n);
  const float* xf = gpt::gatherShards(*acc_, A.finalNorm.data(), A.finalNormAll, P.shape, h);
  const size_t finalModule = blockModule(L), outputModule = finalModule + 1;
  if (times) times[finalModule] += since(headStart);
  double outputSeconds = 0.0;  // the head's forward parts only (it interleaves its backward)
  float* hg = train ? access.layerGradients(head) : nullptr;  // opens the backward pass
  const float* outW = tiedHere ? access.acquireParameters(local(0)) : hp + headNormNumel;
  float* outG = nullptr;
  if (train) {
    outG = tiedHere ? sized(*acc_, A.tiedGrad, localVocab * h) : hg + headNormNumel;
    if (tiedHere) acc_->fillZero(outG, localVocab * h * sizeof(float), acc_->currentStream());
  }
  if (P.logits) {
    // Sliced: each rank writes its columns, and the sum over the group (zeros elsewhere: exact)
    // gathers them.
    float* z = sized(*acc_, A.logits, localVocab);
    kernels::gemmF32(*acc_, false, true, 1, localVocab, h, 1.0f, xf + (N - 1) * h, h, outW, h, 0.0f,
                     z, localVocab);
    lastLogits->assign(vocab, 0.0f);
    acc_->copy(lastLogits->data() + A.vocab.rows.begin, z, localVocab * sizeof(float),
               kernels::CopyKind::DeviceToHost, acc_->currentStream());
    acc_->synchronize(acc_->currentStream());
    if (model) model->allReduce(lastLogits->data(), vocab);
    if (tiedHere) access.releaseParameters(local(0));
    access.releaseParameters(head);
    return 0.0f;
  }
  double lossSum = 0.0;
  float* dxf = train ? sized(*acc_, A.dx, N * h) : nullptr;
  // NeoX's loss: sum(loss * mask) / mask.sum() over this micro-batch's tokens; the engine then
  // averages micro-batches and ranks as DeepSpeed does (each micro-batch weighs the same, however
  // many tokens it counts). With nothing masked, counted == N: the plain mean, bitwise. A batch
  // with every target masked gives 0 loss and no gradient where NeoX's 0 / 0 gives NaN.
  const size_t divisor = std::max<size_t>(P.counted, 1);
  const float rowScale = gradScale / static_cast<float>(divisor);
  for (size_t r0 = 0; r0 < N; r0 += kLogitRows) {
    const size_t rows = std::min(kLogitRows, N - r0);
    const size_t V = localVocab;  // sliced: the rank's columns of the logits
    float* z = sized(*acc_, A.logits, rows * V);
    const Clock::time_point chunkStart = Clock::now();
    kernels::KernelTimer logitsTimer(kernels::KernelFamily::MatrixProducts);
    kernels::gemmF32(*acc_, false, true, rows, V, h, 1.0f, xf + r0 * h, h, outW, h, 0.0f, z, V);
    logitsTimer.stop();
    kernels::KernelTimer lossTimer(kernels::KernelFamily::EmbeddingLoss);
    if (!model)
      lossSum +=
          gpt::crossEntropyRows(*acc_, k, z, P.targetIds + r0, rows, vocab, rowScale, A.rowLosses);
    else
      lossSum += vocabParallelCrossEntropy(*model, A.vocab, z, batch.targetIds.data() + r0, rows,
                                           rowScale);
    lossTimer.stop();
    outputSeconds += since(chunkStart);
    if (!train) continue;
    kernels::KernelTimer gradientTimer(kernels::KernelFamily::MatrixProducts);
    kernels::gemmF32(*acc_, false, false, rows, h, V, 1.0f, z, V, outW, h, 0.0f, dxf + r0 * h, h);
    kernels::gemmF32(*acc_, true, false, V, h, rows, 1.0f, z, V, xf + r0 * h, h, 1.0f, outG, h);
  }
  // Column-parallel's input gradient: every rank's vocabulary columns contribute to it (the
  // rank's rows of the sum with sequence parallelism).
  const float* dNormed =
      train ? gpt::reduceToShards(*acc_, dxf, A.dxLocal, P.shape, h, model) : nullptr;
  const float loss = static_cast<float>(lossSum / static_cast<double>(divisor));
  if (times) {
    times[outputModule] += outputSeconds;
    double forward = times[kEmbedModule] + times[finalModule] + times[outputModule];
    for (size_t l = 0; l < L; ++l) forward += times[blockModule(l) + gpt::BlockRunner::kLayer];
    times[kRootModule] = forward;  // the sum so far over the profiled passes
  }
  if (tiedHere) access.releaseParameters(local(0));
  if (!train) {
    access.releaseParameters(head);
    return loss;
  }
  float* dx = sized(*acc_, A.dy, n * h);
  gpt::ShardedGradients sharded(P.shape.sequence);  // the final norm's, from the rank's rows
  sharded.add(hg, normWeights);
  sharded.add(fbias ? hg + normWeights : nullptr, h);
  A.runner.normBackward(dNormed, B.last.data(), fw, A.fa.data(), A.fb.data(), dx, hg,
                        fbias ? hg + normWeights : nullptr, n);
  sharded.finish();
  access.gradientsDone(head);
  return loss;
}

// Backward through the blocks: A.dy holds d(loss)/d(last block output) and ends holding
// d(loss)/d(first block input); dIn goes to A.dx and the two swap.
void Gpt::blocksBackward(GptPass& P, GptBuffer& B, LayerAccess& access) {
  GptActivations& A = *acts_;
  const size_t h = config_.hiddenSize, N = P.shape.rows, n = P.shape.local;
  const size_t first = static_cast<size_t>(blockBegin_), L = static_cast<size_t>(blockEnd_);
  float* dx = A.dy.data();
  Communicator* model = modelGroup();
  const bool partitioned =
      P.checkpointing && model && config_.partitionActivations && !P.shape.sequence;
  for (size_t l = L; l-- > first;) {
    const int layer = local(static_cast<int>(l + 1)), experts = expertLayer(l);
    const gpt::BlockTensors<const float> p(
        access.acquireParameters(layer), experts < 0 ? nullptr : access.acquireParameters(experts));
    BlockActivations* a = &B.blocks[l - first];
    if (P.checkpointing) {  // recompute this block's forward from its kept input
      if (partitioned)  // every model rank's chunk of it
        model->allGather(a->input.data(), sized(*acc_, A.recompute.input, N * h),
                         N * h / static_cast<size_t>(model->size()));
      else
        kernels::assignDevice(*acc_, A.recompute.input, a->input.data(), a->input.size());
      A.runnerFor(l).forward(p, A.recompute, A.work, P.shape, sized(*acc_, A.discard, n * h),
                             P.dropoutFor(l + 1));
      a = &A.recompute;
    }
    const gpt::BlockTensors<float> g(access.layerGradients(layer),
                                     experts < 0 ? nullptr : access.layerGradients(experts));
    float* dIn = sized(*acc_, A.dx, n * h);
    A.runnerFor(l).backward(p, g, *a, A.work, P.shape, dx, dIn, P.dropoutFor(l + 1));
    if (experts >= 0) access.gradientsDone(experts);
    access.gradientsDone(layer);
    std::swap(A.dx, A.dy);
    dx = A.dy.data();
  }
}

// Embedding: scatter the gradient into the used rows (and positions); no parameters needed.
void Gpt::embedBackward(GptPass& P, LayerAccess& access) {
  GptActivations& A = *acts_;
  const kernels::TransformerKernels& k = acc_->transformerKernels();
  const size_t h = config_.hiddenSize, vocab = config_.paddedVocabSize(), seq = P.seq;
  const size_t N = P.shape.rows;
  const Batch& batch = P.batch;
  const bool learnedPositions = config_.posEmb == PositionEmbedding::Learned;
  Communicator* model = modelGroup();
  const size_t localVocab = A.vocab.rows.count;
  float* dx = A.dy.data();
  if (P.shape.sequence) {  // every rank's rows: the embedding's gradient reads them all
    dx = sized(*acc_, A.embedded, N * h);
    P.shape.sequence->allGather(A.dy.data(), dx, P.shape.local * h);
  }
  float* g0 = access.layerGradients(local(0));
  kernels::KernelTimer timer(kernels::KernelFamily::EmbeddingLoss);
  if (const auto* key = P.dropoutFor(0); key && config_.hiddenDropout > 0)
    gpt::applyDropoutRows(dx, P.embeddedRows(), h, static_cast<float>(config_.hiddenDropout), *key,
                          0, *acc_);
  if (!model) {
    k.embeddingBackward(g0, learnedPositions ? g0 + (vocab + P.shape.positionOffset) * h : nullptr,
                        P.inputIds, dx, N, seq, h);
  } else {
    vocabParallelEmbeddingBackward(A.vocab, batch.inputIds.data(), N, h, dx, g0);
    if (learnedPositions)
      for (size_t r = 0; r < N; ++r) k.add(g0 + localVocab * h + (r % seq) * h, dx + r * h, h);
  }
  if (config_.weightTying && lastStage()) k.add(g0, A.tiedGrad.data(), localVocab * h);
  timer.stop();
  access.gradientsDone(local(0));
}

}  // namespace ds::runtime
