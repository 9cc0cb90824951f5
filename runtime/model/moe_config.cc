#include "runtime/model/moe_config.h"

#include <cstdio>

#include "common/error.h"

namespace ds::runtime {
namespace {

void require(bool ok, const std::string& message) {
  if (!ok) throw Error(message);
}

}  // namespace

const char* moeKindName(MoeKind k) { return k == MoeKind::DeepSpeed ? "deepspeed" : "megablocks"; }
const char* moeRouterName(MoeRouter r) { return r == MoeRouter::TopK ? "topk" : "sinkhorn"; }
const char* noisyGateName(NoisyGate g) {
  return g == NoisyGate::Jitter ? "Jitter" : g == NoisyGate::RSample ? "RSample" : "None";
}

int MoeConfig::moeLayers(int numLayers) const {
  if (!enabled()) return 0;
  return (numLayers + expertInterval - 1) / expertInterval;
}

bool MoeConfig::drawsNoise() const {
  if (!enabled()) return false;
  if (kind == MoeKind::Dropless) return router == MoeRouter::TopK && jitterEps > 0.0;
  return noisyGate != NoisyGate::None || topK == 2 || (topK == 1 && tokenDropping && useRts);
}

void MoeConfig::validate(int numLayers, bool gatedActivation, bool gptjResidual) const {
  if (!enabled()) return;
  const std::string experts = std::to_string(numExperts);
  require(expertInterval >= 1 && expertInterval <= numLayers,
          "moe-expert-interval: expected 1.." + std::to_string(numLayers) +
              " (one MoE layer every that many of num-layers " + std::to_string(numLayers) +
              "), got " + std::to_string(expertInterval));
  require(topK >= 1 && topK <= numExperts, "moe-top-k: expected 1.." + experts +
                                               " (at most moe-num-experts), got " +
                                               std::to_string(topK));
  require(expertParallelSize >= 1 && numExperts % expertParallelSize == 0,
          "moe-expert-parallel-size: " + std::to_string(expertParallelSize) +
              " does not divide moe-num-experts " + experts +
              " (each rank of an expert-parallel group computes an equal share); use a divisor");
  if (kind == MoeKind::Dropless) {
    require(expertParallelSize == 1,
            "moe-expert-parallel-size: " + std::to_string(expertParallelSize) +
                ": NeoX's dropless MoE splits its experts over the model-parallel ranks, not "
                "an expert-parallel group; use 1, or moe-type: deepspeed");
    require(!gatedActivation,
            "activation: NeoX's dropless experts apply a gated activation's function without "
            "its gate (one input weight, no w3), so a gated activation with moe-num-experts > 1 "
            "is refused; use gelu, relu, swish, ... or moe-type: deepspeed (whose experts are "
            "the dense MLP, gate included)");
    require(!gptjResidual,
            "gpt-j-residual: NeoX's dropless MoE layer drops the attention output in a gpt-j "
            "block (its output is the MLP's alone); not supported with moe-num-experts > 1");
    require(
        jitterEps >= 0.0 && jitterEps < 1.0,
        "moe-jitter-eps: expected a number in [0, 1) or null, got " + std::to_string(jitterEps));
    return;
  }
  require(topK <= 2, "moe-top-k: " + std::to_string(topK) +
                         ": DeepSpeed-MoE's gating (moe-type deepspeed) takes 1 or 2");
  require(trainCapacityFactor > 0.0, "moe-train-capacity-factor: expected a positive number");
  require(evalCapacityFactor > 0.0, "moe-eval-capacity-factor: expected a positive number");
  require(minCapacity >= 0, "moe-min-capacity: expected >= 0");
  require(lossCoeff >= 0.0, "moe-loss-coeff: expected >= 0");
  require(!(noisyGate == NoisyGate::RSample && topK == 2),
          "moe-noisy-gate-policy: RSample picks a top-1 expert (DeepSpeed's top2gating ignores "
          "it); use Jitter or None with moe-top-k 2");
}

std::string MoeConfig::describe() const {
  if (!enabled()) return "";
  std::string s = ", MoE: " + std::to_string(numExperts) + " experts, top-" + std::to_string(topK);
  if (kind == MoeKind::Dropless)
    s += std::string(" ") + moeRouterName(router) + " dropless";
  else
    s += std::string(" DeepSpeed gating") + (tokenDropping ? ", dropping" : "") +
         (useResidual ? ", residual" : "");
  s += expertInterval == 1 ? ", every layer"
                           : ", every " + std::to_string(expertInterval) + " layers";
  return s;
}

std::string MoeConfig::architecture() const {
  if (!enabled()) return "";
  std::string s = " moe-num-experts=" + std::to_string(numExperts) +
                  " moe-expert-interval=" + std::to_string(expertInterval) +
                  " moe-top-k=" + std::to_string(topK) + " moe-type=" + moeKindName(kind);
  if (kind == MoeKind::Dropless)
    s += std::string(" moe-router-type=") + moeRouterName(router);
  else
    s += std::string(" moe-use-residual=") + (useResidual ? "true" : "false");
  return s;
}

}  // namespace ds::runtime
