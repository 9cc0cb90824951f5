// Internal to the GPT model (gpt_block.cc): a mixture-of-experts layer in place of a block's MLP,
// on the normed MLP input x [N, h]. Routing per
// moe_routing.h; each expert an MLP of the config's activation (NeoX's dropless experts: no
// biases, never gated; DeepSpeed's: the dense MLP, biases and gate included), run on the rows
// routed to it, grouped expert by expert in token order; out[t] = sum_j weight[t, j] x
// expert_j(x[t]) over the token's choices in order (a dropped choice adds nothing). With
// DeepSpeed's residual (PR-MoE) out = c0 x moe + c1 x mlp(x), c = softmax(x Wc^T + bc). No
// dropout on the output and no output bias, as NeoX's MoE layers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/accelerator.h"
#include "runtime/comm/communicator.h"
#include "runtime/model/gpt_config.h"
#include "runtime/model/moe_routing.h"

namespace ds::runtime::gpt {

// An MLP's tensors (weights [ff1, h] and [h, ff], biases or null), read or written.
template <class T>
struct MlpTensors {
  T* fc1w = nullptr;
  T* fc1b = nullptr;
  T* fc2w = nullptr;
  T* fc2b = nullptr;
};

// A MoE layer's tensors: the router [experts, h], the experts this rank computes (every one, or
// with expert parallelism the rank's 1/ep of them, in order), DeepSpeed's residual MLP and its
// coefficient [2, h] and [2] (null without moe-use-residual).
template <class T>
struct MoeTensors {
  T* router = nullptr;
  std::vector<MlpTensors<T>> experts;
  MlpTensors<T> residual;
  T* coefw = nullptr;
  T* coefb = nullptr;
};

// Statistics of a forward (for the iteration line): tokens per expert and dropped choices.
struct MoeStatistics {
  double auxLoss = 0.0;
  uint32_t minTokens = 0, maxTokens = 0;
  size_t dropped = 0;
};

// Expert parallelism: the rows this rank received for its experts from each rank of the group
// (floats: exact counts below 2^24), where each local expert's rows begin in `expertIn` (expert
// by expert, the sending ranks in order), those rows, and the exchange's chunk of rows per rank.
struct MoeExchange {
  size_t capacity = 0;
  std::vector<float> recvCounts;     // [ranks, local experts]
  std::vector<size_t> localOffsets;  // [local experts + 1]
  std::vector<float> expertIn;       // [R, h]
};

// What a MoE layer keeps for its backward.
struct MoeActivations {
  moe::Routing routing;
  std::vector<float> jitter;         // [N, h] the router input's jitter factors (empty: none)
  std::vector<uint32_t> order;       // the kept choices t k + j, expert by expert, tokens in order
  std::vector<size_t> offsets;       // [experts + 1] each expert's first row of `order`
  std::vector<int32_t> slot;         // [N k] each choice's row in `order`; -1 dropped
  std::vector<float> fc1, act, out;  // the experts' rows: [S, ff1], [S, ff], [S, h]
  // The residual MLP's fc1 and activation, the two branches' outputs and the coefficients.
  std::vector<float> mlpFc1, mlpAct, moeOut, mlpOut, coef;
  MoeExchange exchange;  // expert parallelism: fc1 and act are then of expertIn's rows
  MoeStatistics stats;   // of the last forward
  size_t bytes() const;
};

// Scratch shared by a model's MoE layers.
struct MoeWorkspace {
  std::vector<float> logits, rows, dRows, dAct, dFc1, dOutRows, dWeight, dLogits, dPart, mixed;
  std::vector<float> sendChunks, recvChunks, localRows, localGrad;
};

// The experts split over the model-parallel group (NeoX's dropless MoE as moe.py's
// ParallelDroplessMLP; DeepSpeed's gating alike): every model rank routes the same tokens and
// computes experts [first, first + held) on their rows (with expert parallelism: exchanges them
// over its ep group, whose ranks split that slice again), and DeepSpeed's residual MLP over its
// `ffn` columns (Megatron's slices, the output bias on rank 0); its output is its share of the
// sum, which the block sums over the group (as a row-parallel product's), and its input gradient
// likewise (the router's and the coefficient's shares on rank 0 only).
struct MoeSplit {
  size_t first = 0, held = 0;
  Communicator* model = nullptr;  // null: not split
  size_t ffn = 0;                 // the residual MLP's columns on this rank
};

class MoeLayer {
 public:
  MoeLayer(const GptConfig& c, kernels::Accelerator& acc, MoeSplit split = {});
  // out [N, h] from x [N, h] of samples of `seq` tokens; `noise` null in evaluation. `experts`:
  // the expert-parallel group (DeepSpeed's ep group, size ep: rank r holds and computes experts
  // [r E / ep, (r + 1) E / ep) for every rank of the group, the rows moved there and back by
  // all-to-all), or null: every expert here. Collective over it.
  MoeStatistics forward(const MoeTensors<const float>& p, const float* x, size_t N,
                        MoeActivations& a, MoeWorkspace& w, float* out,
                        const moe::RoutingNoise* noise, Communicator* experts = nullptr) const;
  // dx [N, h] (overwritten) from dOut; parameter gradients added into g (with expert parallelism
  // only this rank's experts', from every rank's rows). auxGrad: d(loss)/d(l_aux)
  // (moe-loss-coeff x the pass's gradient scale; DeepSpeed's gating only).
  void backward(const MoeTensors<const float>& p, const MoeTensors<float>& g, const float* x,
                size_t N, const MoeActivations& a, MoeWorkspace& w, const float* dOut, float* dx,
                double auxGrad, Communicator* experts = nullptr) const;

 private:
  // One MLP over `rows` rows of x: keeps fc1 and act, writes y. Untimed (`timed` false) inside
  // a parallel loop, which is timed as a whole (kernel_timers.h).
  void mlpForward(const MlpTensors<const float>& p, const float* x, size_t rows, size_t ff1,
                  size_t ff, float* fc1, float* act, float* y, bool timed) const;
  // Its backward from dY: parameter gradients added, dX written; dAct and dFc1 scratch of rows.
  void mlpBackward(const MlpTensors<const float>& p, const MlpTensors<float>& g, const float* x,
                   size_t rows, size_t ff1, size_t ff, const float* fc1, const float* act,
                   const float* dY, float* dX, float* dAct, float* dFc1, bool timed) const;
  // The experts spread over the products' threads, each expert whole on one thread (its weight
  // gradients need all its rows): largest first to the least loaded thread. Empty, so one
  // expert after another with every thread in each product, when one expert holds more than a
  // thread's share of the rows, or with one thread.
  std::vector<std::vector<size_t>> expertPlan(const std::vector<size_t>& offsets) const;
  template <class Fn>
  void forExperts(const std::vector<size_t>& offsets, Fn fn) const;  // fn(expert, timed)
  // The experts' outputs a.out [S, h] for the kept choices' rows of the layer input x, here or,
  // with expert parallelism, at the experts' ranks (planExchange first sets a.exchange: the row
  // counts each rank sends each other, the chunk size, where each local expert's rows begin);
  // and their backward: dX [S, h] from dY.
  void runExperts(const MoeTensors<const float>& p, const float* x, MoeActivations& a,
                  MoeWorkspace& w, Communicator* group) const;
  void planExchange(Communicator& group, const std::vector<size_t>& offsets,
                    MoeActivations& a) const;
  // The offsets in a.order of the experts this rank computes or exchanges for (the model rank's
  // slice where split over the model group, else every expert), from 0.
  std::vector<size_t> sliceOffsets(const MoeActivations& a) const;
  void runExpertsBackward(const MoeTensors<const float>& p, const MoeTensors<float>& g,
                          const float* x, const float* dY, float* dX, const MoeActivations& a,
                          MoeWorkspace& w, Communicator* group) const;

  const GptConfig& c_;
  kernels::Accelerator& acc_;
  const kernels::TransformerKernels& k_;
  size_t h_, experts_, xff_, xff1_;
  MoeSplit split_;
  // Whether row `row` of a.order is one of this rank's experts' (always, unless split).
  bool ownRow(const MoeActivations& a, size_t row) const;
  // DeepSpeed's residual MLP: this rank's columns, and its tensors for this rank's share of the
  // output (split: the output bias on rank 0 only).
  size_t residualFfn() const;
  MlpTensors<const float> residualShare(MlpTensors<const float> mlp) const;
};

}  // namespace ds::runtime::gpt
