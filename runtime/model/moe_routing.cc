#include "runtime/model/moe_routing.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "common/error.h"
#include "kernels/cpu/splitmix_impl.h"

namespace ds::runtime::moe {
namespace {

// Row t's softmax (in double, stored as float).
void softmaxRows(const float* logits, size_t tokens, size_t experts, float* out) {
  for (size_t t = 0; t < tokens; ++t) {
    const float* z = logits + t * experts;
    const double m = *std::max_element(z, z + experts);
    double sum = 0.0;
    for (size_t e = 0; e < experts; ++e) sum += std::exp(static_cast<double>(z[e]) - m);
    for (size_t e = 0; e < experts; ++e)
      out[t * experts + e] = static_cast<float>(std::exp(static_cast<double>(z[e]) - m) / sum);
  }
}

// The k largest of v[0..n), largest first; ties to the lower index.
template <class T>
void topK(const T* v, size_t n, int k, int32_t* out) {
  std::vector<int32_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(),
                    [&](int32_t a, int32_t b) { return v[a] > v[b] || (v[a] == v[b] && a < b); });
  std::copy_n(order.begin(), k, out);
}

// NeoX's sinkhorn(): exp(logits) balanced over tokens and experts, in double.
std::vector<double> sinkhornScores(const float* logits, size_t T, size_t E) {
  std::vector<double> cost(T * E), d0(T, 1.0), d1(E, 0.0);
  for (size_t i = 0; i < T * E; ++i) cost[i] = std::exp(static_cast<double>(logits[i]));
  for (size_t t = 0; t < T; ++t)
    for (size_t e = 0; e < E; ++e) d1[e] += cost[t * E + e];
  for (double& v : d1) v = 1.0 / (static_cast<double>(E) * v);
  constexpr double kEps = 1e-8, kTolerance = 1e-4;
  std::vector<double> old = d1;
  for (int iteration = 0; iteration < 3; ++iteration) {
    for (size_t t = 0; t < T; ++t) {
      double s = 0.0;
      for (size_t e = 0; e < E; ++e) s += d1[e] * cost[t * E + e];
      d0[t] = (1.0 / static_cast<double>(T)) / (s + kEps);
    }
    for (size_t e = 0; e < E; ++e) {
      double s = 0.0;
      for (size_t t = 0; t < T; ++t) s += d0[t] * cost[t * E + e];
      d1[e] = (1.0 / static_cast<double>(E)) / (s + kEps);
    }
    double error = 0.0;
    for (size_t e = 0; e < E; ++e) error += std::abs(old[e] - d1[e]);
    old = d1;
    if (error / static_cast<double>(E) < kTolerance) break;
  }
  for (size_t t = 0; t < T; ++t)
    for (size_t e = 0; e < E; ++e) cost[t * E + e] *= d1[e] * d0[t];
  return cost;
}

Routing emptyRouting(size_t tokens, size_t experts, int k) {
  Routing r;
  r.tokens = tokens;
  r.experts = experts;
  r.k = static_cast<size_t>(k);
  r.probs.resize(tokens * experts);
  r.expert.assign(tokens * r.k, -1);
  r.weight.assign(tokens * r.k, 0.0f);
  r.counts.assign(experts, 0);
  return r;
}

size_t capacityOf(size_t tokens, size_t experts, double factor, int minCapacity) {
  const auto c = static_cast<size_t>(
      std::ceil(static_cast<double>(tokens) / static_cast<double>(experts) * factor));
  return std::max(c, static_cast<size_t>(minCapacity));
}

// l_aux and its ce: experts x sum_e mean_t(probs[t, e]) x (first choices of e) / tokens.
void addAuxLoss(Routing& r, const std::vector<uint32_t>& firstChoices) {
  const double T = static_cast<double>(r.tokens), E = static_cast<double>(r.experts);
  r.firstChoiceFraction.resize(r.experts);
  r.auxLoss = 0.0;
  for (size_t e = 0; e < r.experts; ++e) {
    double me = 0.0;
    for (size_t t = 0; t < r.tokens; ++t) me += r.probs[t * r.experts + e];
    r.firstChoiceFraction[e] = firstChoices[e] / T;
    r.auxLoss += me / T * r.firstChoiceFraction[e];
  }
  r.auxLoss *= E;
}

void top1(Routing& r, const float* logits, const GateOptions& o, const RoutingNoise* noise) {
  const size_t T = r.tokens, E = r.experts;
  std::vector<uint32_t> first(E, 0);
  for (size_t t = 0; t < T; ++t) {
    std::vector<float> score(r.probs.begin() + static_cast<std::ptrdiff_t>(t * E),
                             r.probs.begin() + static_cast<std::ptrdiff_t>((t + 1) * E));
    if (o.rsample && noise)  // the noisy logits pick; the clean gates weigh
      for (size_t e = 0; e < E; ++e)
        score[e] = logits[t * E + e] + noise->gumbel(t, RoutingNoise::kRSample, e, E);
    topK(score.data(), E, 1, &r.expert[t]);
    ++first[static_cast<size_t>(r.expert[t])];
  }
  r.counts = first;
  addAuxLoss(r, first);
  if (!o.dropTokens) {
    r.capacity = std::min<size_t>(*std::max_element(first.begin(), first.end()), T);
  } else {
    if (T < static_cast<size_t>(o.minCapacity))
      throw Error("moe-min-capacity: " + std::to_string(o.minCapacity) + " is more than the " +
                  std::to_string(T) +
                  " tokens of a micro-batch (DeepSpeed's top-1 gating needs "
                  "at least that many); lower it or raise the micro-batch size");
    r.capacity = capacityOf(T, E, o.capacityFactor, o.minCapacity);
  }
  // Per expert, the tokens kept: the first `capacity` of them, or those of largest noise (RTS).
  std::vector<std::vector<size_t>> byExpert(E);
  for (size_t t = 0; t < T; ++t) byExpert[static_cast<size_t>(r.expert[t])].push_back(t);
  for (size_t e = 0; e < E; ++e) {
    std::vector<size_t>& tokens = byExpert[e];
    if (tokens.size() <= r.capacity) continue;
    if (o.useRts && noise) {
      std::vector<float> u(T);
      for (size_t t : tokens) u[t] = noise->uniform(t, RoutingNoise::kRts, e, E);
      std::stable_sort(tokens.begin(), tokens.end(),
                       [&](size_t a, size_t b) { return u[a] > u[b]; });
    }
    for (size_t i = r.capacity; i < tokens.size(); ++i) r.expert[tokens[i]] = -1;
  }
  for (size_t t = 0; t < T; ++t) {
    if (r.expert[t] < 0) {
      ++r.dropped;
      continue;
    }
    r.weight[t] = r.probs[t * E + static_cast<size_t>(r.expert[t])];
  }
}

void top2(Routing& r, const float* logits, const GateOptions& o, const RoutingNoise* noise) {
  const size_t T = r.tokens, E = r.experts;
  std::vector<uint32_t> first(E, 0), second(E, 0);
  std::vector<size_t> loc1(T), loc2(T);
  for (size_t t = 0; t < T; ++t) {
    int32_t* chosen = &r.expert[t * 2];
    topK(&r.probs[t * E], E, 1, chosen);
    std::vector<float> score(logits + t * E, logits + (t + 1) * E);
    if (noise)  // DeepSpeed's top2_2nd_expert_sampling (on by default)
      for (size_t e = 0; e < E; ++e)
        score[e] += noise->gumbel(t, RoutingNoise::kSecondExpert, e, E);
    score[static_cast<size_t>(chosen[0])] = -std::numeric_limits<float>::infinity();
    topK(score.data(), E, 1, chosen + 1);
    loc1[t] = first[static_cast<size_t>(chosen[0])]++;
    loc2[t] = second[static_cast<size_t>(chosen[1])]++;
  }
  for (size_t e = 0; e < E; ++e) r.counts[e] = first[e] + second[e];
  addAuxLoss(r, first);
  r.capacity = o.dropTokens ? capacityOf(T, E, 2.0 * o.capacityFactor, o.minCapacity)
                            : *std::max_element(r.counts.begin(), r.counts.end());
  r.rawGate.assign(T * 2, 0.0f);
  for (size_t t = 0; t < T; ++t) {
    int32_t* chosen = &r.expert[t * 2];
    // Second choices queue behind every first choice of their expert.
    const bool keep[2] = {loc1[t] < r.capacity,
                          loc2[t] + first[static_cast<size_t>(chosen[1])] < r.capacity};
    float g[2];
    for (int j = 0; j < 2; ++j) {
      g[j] = keep[j] ? r.probs[t * E + static_cast<size_t>(chosen[j])] : 0.0f;
      r.rawGate[t * 2 + j] = g[j];
    }
    const float denom = std::max(g[0] + g[1], std::numeric_limits<float>::epsilon());
    for (int j = 0; j < 2; ++j) {
      if (!keep[j]) {
        chosen[j] = -1;
        ++r.dropped;
        continue;
      }
      r.weight[t * 2 + j] = g[j] / denom;
    }
  }
}

// d(loss)/d(logits) of row t from d(loss)/d(probs), through the softmax (or the sigmoid).
void probsBackward(const float* p, const double* dp, size_t E, bool sigmoid, float* dz) {
  if (sigmoid) {
    for (size_t e = 0; e < E; ++e)
      dz[e] = static_cast<float>(dp[e] * p[e] * (1.0 - static_cast<double>(p[e])));
    return;
  }
  double dot = 0.0;
  for (size_t e = 0; e < E; ++e) dot += dp[e] * p[e];
  for (size_t e = 0; e < E; ++e) dz[e] = static_cast<float>(p[e] * (dp[e] - dot));
}

}  // namespace

float RoutingNoise::uniform(size_t token, Site site, size_t element, size_t width) const {
  const size_t sample = token / seq_, position = token % seq_ + offset_;
  const uint64_t base =
      splitmixFinalize(splitmixFinalize((*sampleIds_)[sample] ^ 0x9e3779b97f4a7c15ULL) ^
                       splitmixFinalize((layer_ << 8) | site));
  const uint64_t h = splitmixFinalize(base + position * width + element);
  return (static_cast<float>(h >> 40) + 0.5f) * 0x1p-24f;
}

float RoutingNoise::gumbel(size_t token, Site site, size_t element, size_t width) const {
  return -std::log(-std::log(uniform(token, site, element, width)));
}

Routing routeDropless(const float* logits, size_t tokens, size_t experts, int k, MoeRouter router,
                      bool training) {
  Routing r = emptyRouting(tokens, experts, k);
  const bool sigmoid = router == MoeRouter::Sinkhorn && k == 1;
  if (sigmoid)
    for (size_t i = 0; i < tokens * experts; ++i)
      r.probs[i] = static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(logits[i]))));
  else
    softmaxRows(logits, tokens, experts, r.probs.data());
  if (router == MoeRouter::Sinkhorn && training) {
    const std::vector<double> balanced = sinkhornScores(logits, tokens, experts);
    for (size_t t = 0; t < tokens; ++t)
      topK(&balanced[t * experts], experts, k, &r.expert[t * r.k]);
  } else {
    for (size_t t = 0; t < tokens; ++t) topK(&r.probs[t * experts], experts, k, &r.expert[t * r.k]);
  }
  for (size_t t = 0; t < tokens; ++t)
    for (size_t j = 0; j < r.k; ++j) {
      const auto e = static_cast<size_t>(r.expert[t * r.k + j]);
      r.weight[t * r.k + j] = r.probs[t * experts + e];
      ++r.counts[e];
    }
  return r;
}

Routing gateDeepSpeed(const float* logits, size_t tokens, size_t experts, const GateOptions& o,
                      const RoutingNoise* noise) {
  Routing r = emptyRouting(tokens, experts, o.k);
  softmaxRows(logits, tokens, experts, r.probs.data());
  if (o.k == 1)
    top1(r, logits, o, noise);
  else
    top2(r, logits, o, noise);
  return r;
}

void routingBackward(const Routing& r, const MoeConfig& c, const float* dWeight, double auxGrad,
                     float* dLogits) {
  const size_t T = r.tokens, E = r.experts, k = r.k;
  const bool deepspeed = c.kind == MoeKind::DeepSpeed;
  const bool sigmoid = !deepspeed && c.router == MoeRouter::Sinkhorn && k == 1;
  std::vector<double> dp(E);
  for (size_t t = 0; t < T; ++t) {
    std::fill(dp.begin(), dp.end(), 0.0);
    const int32_t* chosen = &r.expert[t * k];
    const float* dw = dWeight + t * k;
    if (deepspeed && k == 2) {
      // w_j = g_j / max(g_0 + g_1, eps): the quotient rule, or 1 / eps where clamped.
      const double g0 = r.rawGate[t * 2], g1 = r.rawGate[t * 2 + 1], sum = g0 + g1;
      const double eps = std::numeric_limits<float>::epsilon();
      double dg[2];
      if (sum >= eps) {
        dg[0] = g1 * (dw[0] - dw[1]) / (sum * sum);
        dg[1] = g0 * (dw[1] - dw[0]) / (sum * sum);
      } else {
        dg[0] = dw[0] / eps;
        dg[1] = dw[1] / eps;
      }
      for (int j = 0; j < 2; ++j)
        if (chosen[j] >= 0) dp[static_cast<size_t>(chosen[j])] += dg[j];
    } else {
      for (size_t j = 0; j < k; ++j)
        if (chosen[j] >= 0) dp[static_cast<size_t>(chosen[j])] += dw[j];
    }
    if (deepspeed)  // l_aux = E sum_e ce[e] mean_t p[t, e]
      for (size_t e = 0; e < E; ++e)
        dp[e] +=
            auxGrad * static_cast<double>(E) * r.firstChoiceFraction[e] / static_cast<double>(T);
    probsBackward(&r.probs[t * E], dp.data(), E, sigmoid, dLogits + t * E);
  }
}

}  // namespace ds::runtime::moe
