// Internal to the GPT model (gpt.cc): one transformer block's forward and backward over a
// micro-batch of `samples` x `seq` rows, the buffers they keep, and the dropout masks. A block's
// parameters and gradients are addressed through BlockLayout offsets from the layer's first
// element, the way LayerAccess hands them out.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/accelerator.h"
#include "kernels/device_array.h"
#include "runtime/comm/communicator.h"
#include "runtime/model/gpt_config.h"
#include "runtime/model/moe_layer.h"

namespace ds::runtime::gpt {

// The blocks' whole-matrix products (not the per-head ones inside the attention's loops), timed as
// their kernel family.
void product(kernels::Accelerator& acc, bool transA, bool transB, size_t m, size_t n, size_t k,
             float alpha, const float* a, size_t lda, const float* b, size_t ldb, float beta,
             float* c, size_t ldc);
// The MLP activation's element kernel (the gated ones apply it to their gate half).
kernels::Unit unitOf(Activation a);

// A group of columns of a row split evenly over ranks' heads (Ulysses' moves,
// sequence_parallel.h): q, k or v of a q/k/v row, or the context.
struct ColumnGroup {
  size_t offset, width;
};

// Element offsets of a block's tensors from its first parameter; a tensor the config leaves out
// (a norm's or a linear's bias) has offset kNone.
// A MoE layer (MoeConfig::isMoeLayer) has a router [experts, h]; fc1w..fc2b are then DeepSpeed's
// residual MLP (kNone without moe-use-residual) and coefw, coefb its mixing coefficient [2, h],
// [2]. Its experts are a layer of their own (the model's expert layers, which expert parallelism
// partitions over the expert-data group): the rank's `experts` experts back to back, the i-th at
// i x expertStride plus its offsets in `expert` (kNone where absent), expertsNumel in all.
struct ExpertOffsets {
  size_t fc1w, fc1b, fc2w, fc2b;
};
struct BlockLayout {
  static constexpr size_t kNone = ~size_t{0};
  size_t ln1w, ln1b, qknw, qknb, qkvw, qkvb, densew, denseb, ln2w, ln2b, fc1w, fc1b, fc2w, fc2b;
  size_t routerw = kNone, coefw = kNone, coefb = kNone;
  size_t experts = 0, expertStride = 0, expertsNumel = 0;
  ExpertOffsets expert{kNone, kNone, kNone, kNone};
  size_t numel;  // the block's layer, experts aside
  bool moe() const { return routerw != kNone; }
};

// A model rank's share of every block (Megatron's layout, runtime/parallel/tensor_slicing.h): its
// query heads, kv heads and MLP columns; the whole block at model size 1. `model` is the group the
// block's two all-reduces each way run over (null at size 1).
struct BlockSlice {
  int rank = 0, size = 1;
  Communicator* model = nullptr;
  size_t firstHead = 0, heads = 0, firstKvHead = 0, kvHeads = 0;
  size_t firstFfn = 0, ffn = 0;  // the rank's columns of the MLP's inner width
  // The MoE experts this rank holds and computes, [firstExpert, firstExpert + experts): the model
  // rank's 1 / size of them, split again over the expert-parallel group (DeepSpeed's ep group).
  size_t firstExpert = 0, experts = 0;
};
// Throws ds::Error naming the key that does not divide by the model-parallel size. `experts`: the
// expert-parallel group (null or of size 1: every expert here).
BlockSlice blockSlice(const GptConfig& c, int rank, int size, Communicator* model,
                      Communicator* experts = nullptr);
// A MoE layer's split over the model ranks (none at model size 1).
MoeSplit moeSplit(const GptConfig& c, const BlockSlice& slice);
// The layout of the rank's slice of a block (the whole block without a slice); a MoE layer's
// with `moe`.
BlockLayout blockLayout(const GptConfig& c, const BlockSlice& slice, bool moe = false);
BlockLayout blockLayout(const GptConfig& c, bool moe = false);

// Where dropout masks come from: a hash of (seed, sample id, layer, site, element), so a mask is
// regenerated identically in the backward pass, after recomputation and on any rank.
struct DropoutKey {
  const std::vector<uint64_t>* sampleIds;
  uint64_t layer;
};
// What a block keeps from its forward pass for its backward pass.
struct BlockActivations {
  kernels::DeviceArray<float> input;     // [N, h] the block's input
  kernels::DeviceArray<float> ln1, ln2;  // [N, h] normalised inputs of attention and MLP
  kernels::DeviceArray<float> stats1a, stats1b, stats2a, stats2b;  // [N] mean/rstd or norm
  kernels::DeviceArray<float> qkRaw;  // [2N, h] queries then keys before the qk norm (qkNorm only)
  kernels::DeviceArray<float> qkStatsA, qkStatsB;  // the qk norm's per-row (or per-head) statistics
  // Sliced (model size t): the rank's heads only, so hq = h / t, kv = kvSize() / t, ff = ff / t.
  kernels::DeviceArray<float> qkv;        // [N, hq + 2 kv] after rotary: [q | k | v]
  kernels::DeviceArray<float> attnStats;  // [B, heads, 2, T] attention's softmax row statistics
  kernels::DeviceArray<float> ctx;        // [N, hq] attention output before the dense projection
  kernels::DeviceArray<float>
      ctxHeads;                     // Ulysses: the attention output in its heads' layout (qkv's)
  kernels::DeviceArray<float> mid;  // [N, h] input + attention (sequential residual only)
  kernels::DeviceArray<float> fc1;  // [N, ff1] MLP pre-activation
  kernels::DeviceArray<float> act;  // [N, ff] MLP activation
  MoeActivations moe;                     // a MoE layer's routing and experts' rows
  size_t bytes() const;
};

// Scratch shared by all blocks (not kept across layers).
struct BlockWorkspace {
  kernels::DeviceArray<float> attnOut, mlpOut, dA, dB, dqkv, dctx, dfc1, dact, qkA, qkB;
  // Sequence parallelism: gathered [N, h] inputs and gradients, a row-parallel product's [N, h]
  // partial sums, and a reduce-scattered input gradient of the rank's rows.
  kernels::DeviceArray<float> gatheredA, gatheredB, partial, dLocal;
  // Ulysses: q/k/v and the context in the rank's rows, and the all-gathered rows they move through.
  kernels::DeviceArray<float> qkvRows, dCtxHeads, dqkvHeads, exchange;
  MoeWorkspace moe;
};

// A block's tensors as the layer access hands them out: the block's layer and, for a MoE layer,
// its experts' layer (BlockLayout).
template <class T>
struct BlockTensors {
  BlockTensors(T* block, T* experts = nullptr) : block(block), experts(experts) {}
  T* block;
  T* experts;
};

struct BlockShape {
  size_t samples, seq, rows;  // rows = samples * seq
  // Megatron's sequence parallelism (sequence_parallel.h): the norms, residual sums and hidden
  // dropouts run on this rank's `local` rows from `firstRow` only, gathered over `sequence` (the
  // model group) before the column-parallel products and reduce-scattered after the row-parallel
  // ones. Without it: local = rows, firstRow = 0, sequence null.
  size_t local = 0, firstRow = 0;
  Communicator* sequence = nullptr;
  // DeepSpeed-Ulysses (sequence_parallel.h): the rows are this rank's `seq` positions of each
  // sample, from positionOffset on, of samples of fullSeq; attention runs on every position of
  // its 1/u of the heads, the rows moved there and back over `ulysses`. Null: every position.
  Communicator* ulysses = nullptr;
  size_t positionOffset = 0, fullSeq = 0;
  // Expert parallelism (DeepSpeed's ep group): the ranks a MoE layer's experts are split over
  // (each holds BlockSlice::experts of them); null: every expert on this rank.
  Communicator* experts = nullptr;
};
// The shape of a pass over `samples` sequences of `seq`, with every row on this rank.
inline BlockShape wholeRows(size_t samples, size_t seq) {
  return {samples, seq, samples * seq, samples * seq, 0, nullptr, nullptr, 0, seq};
}
// Hidden dropout over the rows of s the rank holds ([s.firstRow, s.firstRow + s.local) of the
// batch's [samples * seq, width], from position s.positionOffset of each sample with Ulysses):
// x *= keep ? 1 / (1 - p) : 0, each element with the mask it has in its sample (drawn for
// (sample id, layer, site, element)), so every layout draws the whole batch's masks. The mask
// kernel runs on `acc` (the model passes its own).
void applyDropoutRows(float* x, const BlockShape& s, size_t width, float p, const DropoutKey& key,
                      uint64_t site, kernels::Accelerator& acc);

class BlockRunner {
 public:
  // Every product and kernel runs on `acc` (its transformerKernels() table).
  // `moe`: the runner of the config's MoE layers (MoeConfig::isMoeLayer).
  BlockRunner(const GptConfig& config, kernels::Accelerator& acc, const BlockSlice& slice,
              bool moe = false);
  // Rotary cos/sin tables [positions, rotaryDim / 2].
  void prepareRotary(size_t positions);

  // The flops profiler's timers of one block, in the order of Gpt's module table.
  enum Timer { kLayer, kNorm1, kAttention, kQkv, kCore, kDense, kNorm2, kMlp, kFc1, kAct, kFc2,
               kTimers };
  // out = block(in); keeps what backward needs in `a` (a.input must already hold `in`). `times`
  // (kTimers seconds, may be null) accumulates each part's forward latency for the profiler.
  void forward(BlockTensors<const float> params, BlockActivations& a, BlockWorkspace& w,
               const BlockShape& s, float* out, const DropoutKey* dropout, double* times = nullptr);
  // dIn = d(loss)/d(input) from dOut; adds the parameter gradients into grads.
  void backward(BlockTensors<const float> params, BlockTensors<float> grads,
                const BlockActivations& a, BlockWorkspace& w, const BlockShape& s,
                const float* dOut, float* dIn, const DropoutKey* dropout);
  const BlockLayout& layout() const { return layout_; }
  // d(loss)/d(l_aux) of the next backward passes: moe-loss-coeff x the pass's gradient scale.
  void setAuxLossGradient(double g) { auxLossGrad_ = g; }

  // The config's norm over `rows` rows of x (the blocks' two and the final one). sa, sb keep
  // per-row statistics for the backward; b and db are null where the norm has no bias.
  void norm(const float* x, const float* w, const float* b, float* out, float* sa, float* sb,
            size_t rows) const;
  void normBackward(const float* dout, const float* x, const float* w, const float* sa,
                    const float* sb, float* dx, float* dw, float* db, size_t rows) const;

 private:
  // use-qk-layernorm on the q and k columns of qkv [N, Q], in place; keeps the inputs and
  // statistics in `a`. Backward turns dqkv's q and k columns from d(normed) into d(raw).
  void qkNormForward(const float* w, const float* b, float* qkv, BlockActivations& a,
                     BlockWorkspace& ws, size_t N) const;
  void qkNormBackward(const float* w, float* dw, float* db, float* dqkv, const BlockActivations& a,
                      BlockWorkspace& ws, size_t N) const;

  // Where attention runs: every position of the rank's heads (Ulysses: 1/u of them, every
  // position of the samples), the first of them among all the model's heads (dropout's masks),
  // and q/k/v's and the context's column groups for Ulysses' moves.
  struct AttentionLayout {
    kernels::AttentionShape shape;
    size_t firstHead;
    std::vector<ColumnGroup> qkvGroups, ctxGroups;
  };
  AttentionLayout attentionLayout(const BlockShape& s) const;
  // Rotary embedding (or its inverse) on q and k of `shape`'s rows, in place.
  void rotate(float* qkv, const kernels::AttentionShape& shape, bool inverse) const;

  // forward's halves: the attention's output goes to w.attnOut, the MLP's (which reads it) to
  // w.mlpOut. Laps takes the profiler's times.
  class Laps;
  void attentionForward(const float* params, BlockActivations& a, BlockWorkspace& w,
                        const BlockShape& s, const DropoutKey* dropout, Laps& laps);
  void mlpForward(BlockTensors<const float> params, BlockActivations& a, BlockWorkspace& w,
                  const BlockShape& s, const DropoutKey* dropout, Laps& laps);
  // attention.dense and dense_4h_to_h: out = x [N, width] W^T, row-parallel (the ranks' partial
  // sums, then the bias once), then hidden dropout at `site`; out holds the rank's s.local rows
  // (all N without sequence parallelism). bias may be null.
  void outputProjection(const float* x, size_t width, const float* weight, const float* bias,
                        kernels::DeviceArray<float>& out, BlockWorkspace& w, const BlockShape& s,
                        const DropoutKey* dropout, uint64_t site) const;
  // backward's halves, the MLP's first. It returns the gradient of the MLP's normed input (w.dB),
  // which the attention's half completes with QKV's where the norms are tied.
  float* mlpBackward(BlockTensors<const float> params, BlockTensors<float> grads,
                     const BlockActivations& a, BlockWorkspace& w, const BlockShape& s,
                     const float* dOut, float* dIn, const DropoutKey* dropout);
  void attentionBackward(const float* params, float* grads, const BlockActivations& a,
                         BlockWorkspace& w, const BlockShape& s, const float* dOut, float* dIn,
                         float* dLn, const DropoutKey* dropout);
  // The gradient of an output that reached the residual sum through hidden dropout: `from`
  // itself without dropout, else its masked copy in w.dA.
  const float* throughHiddenDropout(const float* from, BlockWorkspace& w, const BlockShape& s,
                                    const DropoutKey* dropout, uint64_t site) const;
  // The dense MLP's backward from dOut to the gradient of its normed input (dLn).
  void denseMlpBackward(const float* params, float* grads, const BlockActivations& a,
                        BlockWorkspace& w, const BlockShape& s, const float* dOut,
                        const float* mlpNormed, float* dLn, const DropoutKey* dropout);
  // A MoE layer's tensors in params or grads.
  template <class T>
  MoeTensors<T> moeTensors(BlockTensors<T> t) const;

  const GptConfig& c_;
  kernels::Accelerator& acc_;
  const kernels::TransformerKernels& k_;
  BlockSlice slice_;
  BlockLayout layout_;
  kernels::DeviceArray<float> cos_, sin_;
  // A LayerNorm without bias (use-bias-in-norms: false) runs the biased kernel with zero bias
  // and a gradient nobody reads.
  kernels::DeviceArray<float> zeroBias_;
  mutable kernels::DeviceArray<float> unusedBiasGrad_;
  mutable kernels::DeviceArray<float>
      normPartials_;  // per-row-block gradient sums: norms and biases
  MoeLayer moe_;
  double auxLossGrad_ = 0.0;
};

using kernels::sized;
// Resizes v to n elements without shrinking its allocation (buffers are reused call after call).
inline float* sized(std::vector<float>& v, size_t n) {
  v.resize(n);
  return v.data();
}

}  // namespace ds::runtime::gpt
