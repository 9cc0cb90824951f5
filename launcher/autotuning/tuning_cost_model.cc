// The cost terms of each ZeRO stage and layout, and the refit: see the header.
#include "launcher/autotuning/tuning_cost_model.h"

#include <algorithm>
#include <cmath>

namespace ds::launcher {
namespace {

// Priors: what a rank of a 2-core machine sustains (the refit replaces them with the job's own).
constexpr double kFlopsPerSecond = 5e9;
constexpr double kBytesPerSecond = 1e9;
constexpr double kSecondsPerPass = 2e-3;
constexpr double kSwapBytesPerSecond = 5e8;
constexpr double kUpdatesPerSecond = 3e8;  // Adam's step reads and writes ~32 bytes an element
// Rows at which a matrix product reaches half its best rate: small micro-batches pay for it.
constexpr double kHalfRateRows = 32;
// How strongly the refit keeps to the priors, against one measurement's weight of 1.
constexpr double kPriorWeight = 0.05;

// Solves the k x k system a x = b in place (Gaussian elimination with partial pivoting).
void solve(std::array<std::array<double, kCostTerms>, kCostTerms>& a,
           std::array<double, kCostTerms>& b) {
  const size_t n = kCostTerms;
  for (size_t c = 0; c < n; ++c) {
    size_t pivot = c;
    for (size_t r = c + 1; r < n; ++r)
      if (std::fabs(a[r][c]) > std::fabs(a[pivot][c])) pivot = r;
    std::swap(a[c], a[pivot]);
    std::swap(b[c], b[pivot]);
    if (std::fabs(a[c][c]) < 1e-300) continue;
    for (size_t r = 0; r < n; ++r) {
      if (r == c) continue;
      const double f = a[r][c] / a[c][c];
      for (size_t k = c; k < n; ++k) a[r][k] -= f * a[c][k];
      b[r] -= f * b[c];
    }
  }
  for (size_t c = 0; c < n; ++c) b[c] = std::fabs(a[c][c]) < 1e-300 ? 1.0 : b[c] / a[c][c];
}

}  // namespace

CostFeatures costFeatures(const TuningChoice& c, const ModelFacts& m, int world) {
  const double pipe = c.pipe, model = c.model;
  const double data = std::max(1.0, world / (pipe * model));
  const double micro = static_cast<double>(c.micro);
  const double gas = static_cast<double>(c.accumulation);
  const double ring = (data - 1) / data;
  // Each rank's share of the weights, and of the step's samples.
  const double local = m.parameters / (pipe * model);
  double compute = m.flopsPerSample * micro * gas / (pipe * model);
  if (c.checkpointActivations.value_or(false)) compute *= 4.0 / 3.0;  // one more forward
  if (pipe > 1) compute *= (gas + pipe - 1) / gas;                    // the pipeline's bubble
  const double rows = micro * m.tokensPerSample;
  compute *= (rows + kHalfRateRows) / rows;

  // fp32 elements; a 16-bit reduction's half is one of the things the refit absorbs.
  const double g = 4;
  double bytes = 0;
  switch (c.stage) {
    case 0:
    case 1:  // one all-reduce (or reduce-scatter + all-gather) per step
      bytes = 2 * ring * local * g;
      break;
    case 2:  // a reduce-scatter per micro-batch, the updated shards gathered once
      bytes = (gas + 1) * ring * local * g;
      break;
    default:  // the weights gathered for forward and backward, gradients reduce-scattered
      bytes = 3 * gas * ring * local * g;
      break;
  }
  if (model > 1)  // Megatron's four all-reduces of a layer's hidden states per micro-batch
    bytes += gas * m.layers / pipe * 4 * 2 * (model - 1) / model * micro * m.layerActivationBytes;
  if (pipe > 1)  // activations and their gradients across each stage boundary
    bytes += gas * 2 * micro * m.layerActivationBytes;

  // NVMe offload: the master weights and Adam's moments (12 bytes an element) of the shard read
  // and written once a step; offloaded parameters read for each forward and backward.
  const double shard = local / data;
  double swap = 0;
  if (c.optimizerOffload) swap += 2 * 12 * shard;
  if (c.paramOffload) swap += 2 * gas * shard * 4;
  const double passes = gas * pipe;
  // The optimizer's step: every element of the rank's weights at stage 0, its shard above.
  const double updates = c.stage == 0 ? local : shard;
  return {compute, bytes, passes, updates, swap};
}

CostModel::CostModel()
    : prior_{1 / kFlopsPerSecond, 1 / kBytesPerSecond, kSecondsPerPass, 1 / kUpdatesPerSecond,
             1 / kSwapBytesPerSecond},
      weights_(prior_) {}

double CostModel::stepSeconds(const CostFeatures& f) const {
  double t = 0;
  for (size_t j = 0; j < kCostTerms; ++j) t += weights_[j] * f[j];
  return t;
}

void CostModel::observe(const CostFeatures& f, double measuredStepSeconds) {
  if (!(measuredStepSeconds > 0)) return;
  seen_.emplace_back(f, measuredStepSeconds);
  refit();
}

void CostModel::refit() {
  // weights = prior x s; minimise sum_i (1 - sum_j s_j g_ij)^2 + kPriorWeight sum_j (s_j - 1)^2
  // with g_ij = prior_j f_ij / t_i: relative errors, so fast and slow experiments count alike.
  std::array<std::array<double, kCostTerms>, kCostTerms> a{};
  std::array<double, kCostTerms> b{};
  for (size_t j = 0; j < kCostTerms; ++j) {
    a[j][j] = kPriorWeight;
    b[j] = kPriorWeight;
  }
  for (const auto& [f, t] : seen_) {
    CostFeatures g{};
    for (size_t j = 0; j < kCostTerms; ++j) g[j] = prior_[j] * f[j] / t;
    for (size_t j = 0; j < kCostTerms; ++j) {
      b[j] += g[j];
      for (size_t k = 0; k < kCostTerms; ++k) a[j][k] += g[j] * g[k];
    }
  }
  solve(a, b);
  for (size_t j = 0; j < kCostTerms; ++j) weights_[j] = prior_[j] * std::max(0.01, b[j]);
}

}  // namespace ds::launcher
