// The GPT model's architecture, in GPT-NeoX's terms (../shared/seeds/neox-config-parameters.md):
// the values of its model keys after defaults, as the NeoX YAML reader fills them. Checked by
// validate(), which names the NeoX key of anything wrong.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/model/moe_config.h"

namespace ds::runtime {

enum class PositionEmbedding { Learned, Sinusoidal, Rotary, None };
// NeoX's norms: LayerNorm, RMSNorm (per-dimension scale, no bias), ScaleNorm (one scalar gain:
// x / max(|x|, eps) * g).
enum class NormKind { LayerNorm, RmsNorm, ScaleNorm };
// NeoX's MLP activations. The gated ones (GeGLU, ReGLU, SwiGLU, GLU, bilinear) split
// dense_h_to_4h's outputs into [x | gate] and pass x * f(gate) on; swish is NeoX's name for SiLU.
enum class Activation { Gelu, Geglu, Relu, Silu, Reglu, Swiglu, Glu, Bilinear, Softsign, Mish };
// NeoX's init methods (megatron/model/init_functions.py): normal (std), scaled_normal
// (std / sqrt(2 * layers)), single_residual_scaled_normal (std / sqrt(layers)), small_init
// (sqrt(2 / (5 * hidden))), wang_init (2 / layers / sqrt(hidden)), and PyTorch's xavier_normal
// (sqrt(2 / (fan_in + fan_out))) and xavier_uniform (U(-a, a), a = sqrt(6 / (fan_in + fan_out))).
enum class InitMethod {
  Normal,
  ScaledNormal,
  SmallInit,
  WangInit,
  SingleResidualScaledNormal,
  XavierNormal,
  XavierUniform
};

struct GptConfig {
  int numLayers = 2;
  int hiddenSize = 64;
  int numAttentionHeads = 4;
  int seqLength = 64;
  int maxPositionEmbeddings = 64;
  int vocabSize = 257;  // the tokenizer's; padded below
  int makeVocabSizeDivisibleBy = 128;
  PositionEmbedding posEmb = PositionEmbedding::Learned;
  double rotaryPct = 1.0;
  double rotaryEmbBase = 10000.0;
  NormKind norm = NormKind::LayerNorm;
  double layernormEpsilon = 1e-5;
  double rmsNormEpsilon = 1e-8;
  double scalenormEpsilon = 1e-8;
  Activation activation = Activation::Gelu;
  int intermediateSize = 0;      // NeoX's intermediate-size; 0: unset (4 * hidden)
  int mlpMultipleOf = 0;         // NeoX's mlp-multiple-of; 0: unset (NeoX's default 1)
  double expansionFactor = 0.0;  // NeoX's expansion-factor: MLP width / hidden; 0: unset
  int numKvHeads = 0;            // grouped-query attention's key/value heads; 0: one per query head
  bool biasInNorms = true;       // use-bias-in-norms (LayerNorm's bias; the others have none)
  bool biasInAttnLinear = true;  // use-bias-in-attn-linear (query_key_value and dense)
  bool biasInMlp = true;         // use-bias-in-mlp (both MLP projections)
  bool weightTying = true;  // NeoX's no-weight-tying: false
  bool gptjResidual = false;
  bool gptjTied = false;  // gpt-j-tied: one norm feeds both branches of a gpt-j block
  // sliding-window-width: query i attends to keys i - W..i (flash-attention's window_size (W, -1)
  // under its causal mask); -1: unset, full causal attention.
  int slidingWindowWidth = -1;
  // use-qk-layernorm: NeoX's norm of the queries and of the keys (one module, shared), after the
  // query_key_value projection and before rotary (gpt_block.cc says over what).
  bool qkNorm = false;
  double attentionDropout = 0.0;
  double hiddenDropout = 0.0;
  InitMethod initMethod = InitMethod::Normal;
  InitMethod outputLayerInitMethod = InitMethod::ScaledNormal;
  double initMethodStd = 0.02;
  bool checkpointActivations = false;
  // With checkpointing and tensor slicing: each block's kept input is split over the model ranks
  // and all-gathered before its recomputation (NeoX's partition-activations).
  bool partitionActivations = false;
  // Megatron's sequence parallelism with tensor slicing (NeoX's sequence-parallel): norms, residual
  // sums and dropouts on 1/t of the rows per model rank (runtime/model/sequence_parallel.h). No
  // effect at model-parallel-size 1, as in NeoX.
  bool sequenceParallel = false;
  // Mixture of experts (moe-* keys): which layers, which flavour, the gating (moe_config.h).
  MoeConfig moe;

  // The embedding and output rows: vocabSize rounded up to makeVocabSizeDivisibleBy.
  int paddedVocabSize() const;
  int headDim() const { return hiddenSize / numAttentionHeads; }
  int rotaryDim() const;  // dims of each head that rotary embedding turns (even)
  int kvHeads() const { return numKvHeads > 0 ? numKvHeads : numAttentionHeads; }
  int kvSize() const { return kvHeads() * headDim(); }       // the width of K, and of V
  int qkvSize() const { return hiddenSize + 2 * kvSize(); }  // query_key_value's outputs
  bool gated() const;
  bool normHasBias() const { return norm == NormKind::LayerNorm && biasInNorms; }
  int normWeightSize() const { return norm == NormKind::ScaleNorm ? 1 : hiddenSize; }
  // The query/key norm's parameters: its weights (normWeightSize()) and, for LayerNorm, a bias of
  // hidden-size that NeoX always creates (use-bias-in-norms does not reach it). 0 when off.
  int qkNormParams() const;
  // The causal softmax's window over `seq` positions: query i sees keys i - window..i; the
  // sequence itself when no sliding window is set (full causal attention).
  size_t attentionWindow(size_t seq) const;
  // The MLP's inner width (dense_4h_to_h's inputs) and dense_h_to_4h's outputs (twice the inner
  // width when gated), rounded as NeoX's ParallelMLP does (gpt_config.cc).
  int ffnSize() const;
  int ffnInputSize() const;
  // An expert's inner width and input projection's outputs: the dense MLP's with DeepSpeed-MoE
  // (its experts are copies of the dense MLP); NeoX's dropless experts are intermediate-size or
  // 4 x hidden rounded up to a multiple of 256 (moe_mlp.py), never gated.
  int expertFfnSize() const;
  int expertFfnInputSize() const;
  // Multiply-accumulates per token of block `layer`'s MLP: a MoE layer's router, its k experts
  // and DeepSpeed's residual MLP with its coefficient.
  double mlpMacsPerToken(int layer) const;

  // The first configured option whose passes still read or write activations and parameters
  // from host code between the kernels, so that a GPT on a device the host cannot read refuses
  // it (Gpt's constructor, and ds-launch before any rank starts): "model-parallel-size above 1",
  // ... ; null where there is none. `modelParallel` and `sequenceParallel` are the grid's sizes.
  const char* hostOnlyOption(int modelParallel, int sequenceParallel) const;

  // Throws ds::Error naming the NeoX key (e.g. "num-attention-heads: 5 does not divide
  // hidden-size 64").
  void validate() const;
  // What splitting the model over `modelParallelSize` ranks needs on top of validate(): Megatron's
  // slices are even, so the query heads, the kv heads and the MLP's inner width each divide by it,
  // and the query/key norm is not sliced. Throws ds::Error naming the key; the config parser asks
  // it before any rank starts, and Gpt's constructor again.
  void validateModelParallel(int modelParallelSize) const;
  std::string describe() const;  // one line: layers, hidden, heads, options
  // Model::architecture() of a GPT of this config: every key that shapes a tensor or what its
  // values mean, by its NeoX name. Not the ones a run may change on resume: sequence length (with
  // a fitting position table), dropout, init, activation checkpointing.
  std::string architecture() const;
};

const char* positionEmbeddingName(PositionEmbedding p);
const char* normName(NormKind n);
const char* activationName(Activation a);
const char* initMethodName(InitMethod m);

}  // namespace ds::runtime
