// The GPT's mixture-of-experts options, in GPT-NeoX's keys: today's NeoX dropless MoE
// (moe-type megablocks, the default: Sinkhorn or top-k routing, no token dropped, no auxiliary
// loss) and DeepSpeed-MoE's gating as NeoX ran it before May 2025 (moe-type deepspeed:
// deepspeed.moe.layer.MoE's top-1 / top-2 gating with capacity, the load-balancing loss, random
// token selection and the residual MoE). docs/gpt-trainer.md has the maths; the layer is
// runtime/model/moe_layer.h.
#pragma once

#include <string>

namespace ds::runtime {

enum class MoeKind { Dropless, DeepSpeed };
enum class MoeRouter { Sinkhorn, TopK };
// DeepSpeed's noisy_gate_policy: Jitter multiplies the gate's input by U(1 - 1e-2, 1 + 1e-2),
// RSample adds Gumbel noise to the logits that pick a top-1 expert; both only in training.
enum class NoisyGate { None, Jitter, RSample };

struct MoeConfig {
  int numExperts = 1;      // moe-num-experts; 1: no MoE
  int expertInterval = 1;  // moe-expert-interval: layer l (from 0) is MoE when l % interval == 0
  int topK = 1;            // moe-top-k
  MoeKind kind = MoeKind::Dropless;  // moe-type: megablocks | deepspeed
  // Dropless (NeoX's router.py): sinkhorn picks the experts by Sinkhorn-balanced scores in
  // training and weighs them by sigmoid (top-1) or softmax (top-k) of the logits; topk picks and
  // weighs by the softmax. jitterEps (moe-jitter-eps; 0: off) multiplies the router's input by
  // U(1 - eps, 1 + eps) in training, topk router only, as NeoX.
  MoeRouter router = MoeRouter::Sinkhorn;
  double jitterEps = 0.0;
  // DeepSpeed-MoE (NeoX's old keys, their defaults: NeoX's, not deepspeed.moe.layer.MoE's).
  double lossCoeff = 0.1;                 // moe-loss-coeff: the summed l_aux's weight in the loss
  double trainCapacityFactor = 1.0;       // moe-train-capacity-factor
  double evalCapacityFactor = 1.0;        // moe-eval-capacity-factor
  int minCapacity = 4;                    // moe-min-capacity
  bool tokenDropping = false;             // moe-token-dropping (DeepSpeed's drop_tokens)
  bool useResidual = true;                // moe-use-residual: PR-MoE's dense MLP beside the experts
  int expertParallelSize = 1;             // moe-expert-parallel-size (DeepSpeed's ep_size)
  NoisyGate noisyGate = NoisyGate::None;  // moe-noisy-gate-policy
  bool useRts = true;                     // moe-use-rts: random token selection on overflow

  bool enabled() const { return numExperts > 1; }
  // Whether block `layer` (0-based) is a MoE layer.
  bool isMoeLayer(int layer) const { return enabled() && layer % expertInterval == 0; }
  int moeLayers(int numLayers) const;
  // Whether training draws random numbers (jitter, Gumbel noise, random token selection).
  bool drawsNoise() const;
  // Throws ds::Error naming the key of anything wrong or not implemented.
  void validate(int numLayers, bool gatedActivation, bool gptjResidual) const;
  std::string describe() const;      // ", MoE: 8 experts top-1 sinkhorn, every layer"
  std::string architecture() const;  // the keys that shape tensors or their meaning
};

const char* moeKindName(MoeKind k);      // NeoX's moe-type value
const char* moeRouterName(MoeRouter r);  // moe-router-type's value
const char* noisyGateName(NoisyGate g);  // moe-noisy-gate-policy's value

}  // namespace ds::runtime
