// Mixture-of-experts routing: which experts each token goes to and with what weight, from the
// router's logits [tokens, experts], and the logits' gradient from the weights' (plus DeepSpeed's
// load-balancing loss). Two flavours (moe_config.h):
// - dropless, NeoX's router.py: topk picks the k largest softmax probabilities and weighs by them;
//   sinkhorn (training) picks the k largest Sinkhorn-balanced scores of exp(logits) (at most 3
//   iterations, tolerance 1e-4, in double) and weighs by sigmoid (k = 1) or softmax (k > 1) of
//   the logits, unrenormalised; in evaluation sinkhorn picks by those weights directly.
// - DeepSpeed-MoE's top1gating / top2gating (deepspeed/moe/sharded_moe.py): softmax gates, a
//   capacity of max(ceil(tokens / experts x factor (x 2 for top-2)), min capacity) when dropping,
//   l_aux = experts x sum_e mean_t(gates[t, e]) x mean_t(first choice is e), top-1 weights the raw
//   gate and keeps per expert the first tokens (or with random token selection the tokens of
//   largest uniform noise), top-2 keeps first choices before second ones and renormalises the two
//   weights (denominator at least fp32's epsilon); a dropped choice has weight 0.
// Ties between equal scores go to the lower expert (torch.argmax's rule; torch.topk leaves it
// open). Random draws come from the caller's RoutingNoise, so a recomputed forward routes alike.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "runtime/model/moe_config.h"

namespace ds::runtime::moe {

// Uniform draws in (0, 1) for (token, site, element), a pure function of them (a hash of the
// sample's id, the layer and the token's position), or none: evaluation draws nothing.
class RoutingNoise {
 public:
  RoutingNoise(const std::vector<uint64_t>* sampleIds, uint64_t layer, size_t seq,
               size_t positionOffset = 0)
      : sampleIds_(sampleIds), layer_(layer), seq_(seq), offset_(positionOffset) {}
  // Sites: one per use, so no two draw the same numbers.
  enum Site : uint64_t { kJitter = 16, kRSample = 17, kRts = 18, kSecondExpert = 19 };
  float uniform(size_t token, Site site, size_t element, size_t width) const;
  float gumbel(size_t token, Site site, size_t element, size_t width) const;

 private:
  const std::vector<uint64_t>* sampleIds_;
  uint64_t layer_;
  size_t seq_, offset_;
};

struct Routing {
  size_t tokens = 0, experts = 0, k = 0;
  std::vector<float> probs;      // [tokens, experts] softmax (or sigmoid) of the logits
  std::vector<int32_t> expert;   // [tokens, k] the chosen experts; -1: dropped past capacity
  std::vector<float> weight;     // [tokens, k] their combine weights (0 when dropped)
  std::vector<uint32_t> counts;  // [experts] choices routed to each before any dropping
  size_t capacity = 0;           // DeepSpeed: the capacity used; dropless: 0
  size_t dropped = 0;            // choices past capacity
  double auxLoss = 0.0;          // DeepSpeed's l_aux; dropless: 0
  // For the backward: DeepSpeed's per-expert first-choice fraction (l_aux's ce) and top-2's
  // pre-normalisation gates of the two choices.
  std::vector<double> firstChoiceFraction;
  std::vector<float> rawGate;  // [tokens, k] (top-2 only)
};

// NeoX's dropless routing of `logits` [tokens, experts]; `training` picks sinkhorn's balanced
// selection (topk is the same in both).
Routing routeDropless(const float* logits, size_t tokens, size_t experts, int k, MoeRouter router,
                      bool training);

// DeepSpeed's gating; `noise` null in evaluation (no RSample, RTS or second-expert sampling: an
// evaluation stays deterministic, where DeepSpeed also samples top-2's second expert).
struct GateOptions {
  int k = 1;
  double capacityFactor = 1.0;
  int minCapacity = 4;
  bool dropTokens = false, useRts = true, rsample = false;
};
Routing gateDeepSpeed(const float* logits, size_t tokens, size_t experts, const GateOptions& o,
                      const RoutingNoise* noise);

// dLogits [tokens, experts] (overwritten) from dWeight [tokens, k], the weights' gradient, plus
// auxGrad x d(l_aux)/d(logits) for DeepSpeed's gating.
void routingBackward(const Routing& r, const MoeConfig& c, const float* dWeight, double auxGrad,
                     float* dLogits);

}  // namespace ds::runtime::moe
