// Lamb against a double-precision reference of DeepSpeed's FusedLamb update rule (trust ratio
// clamps, eps placement, bias correction, zero norms), and ZeRO-style sharding: 1-4 contiguous
// shards of one flat buffer, ranks as threads summing their partial norms, equal the unsharded run.
#include <barrier>
#include <catch2/catch.hpp>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "runtime/optim/lamb.h"
#include "test/param_table.h"
#include "test/rank_threads.h"

using namespace ds::runtime;
using ds::test::makeSpecs;
using ds::test::stepAt;

namespace {

// Tensor 1 starts at zero (a bias): its first trust ratio has ||p|| = 0, so the ratio is 1.
std::vector<float> initialParams(const std::vector<ParamSpec>& specs) {
  std::vector<float> p(specs.back().offset + specs.back().numel);
  for (size_t i = 0; i < p.size(); ++i) p[i] = std::cos(0.71f * i) * (0.2f + 0.1f * (i % 7));
  for (size_t i = 0; i < specs[1].numel; ++i) p[specs[1].offset + i] = 0.0f;
  return p;
}

std::vector<float> gradients(size_t n, int step) {
  std::vector<float> g(n);
  for (size_t i = 0; i < n; ++i) g[i] = std::sin(0.37f * i + 1.3f * step) * (1.0f + 0.2f * (i % 3));
  return g;
}

// DeepSpeed's FusedLamb step (fused_lamb_cuda_kernel.cu) for whole tensors, in double.
struct ReferenceLamb {
  LambParams hp;
  std::vector<ParamSpec> specs;
  std::vector<double> p, m, v;
  std::vector<double> coeffs;
  int t = 0;

  ReferenceLamb(const LambParams& params, const std::vector<ParamSpec>& s,
                const std::vector<float>& init)
      : hp(params), specs(s), p(init.begin(), init.end()), m(init.size()), v(init.size()) {}

  void step(const std::vector<float>& g, double lr) {
    ++t;
    const double b1 = hp.beta1, b2 = hp.beta2;
    const double stepSize =
        hp.biasCorrection ? lr * std::sqrt(1 - std::pow(b2, t)) / (1 - std::pow(b1, t)) : lr;
    coeffs.clear();
    for (const ParamSpec& spec : specs) {
      const double decay = spec.weightDecay ? hp.weightDecay : 0.0;
      std::vector<double> u(spec.numel);
      double wSum = 0, uSum = 0;
      for (size_t k = 0; k < spec.numel; ++k) {
        const size_t j = spec.offset + k;
        m[j] = b1 * m[j] + (1 - b1) * g[j];
        v[j] = b2 * v[j] + (1 - b2) * g[j] * g[j];
        const double denom = hp.epsInsideSqrt ? std::sqrt(v[j] + hp.eps) : std::sqrt(v[j]) + hp.eps;
        u[k] = m[j] / denom + decay * p[j];
        wSum += p[j] * p[j];
        uSum += u[k] * u[k];
      }
      double coeff = 1.0;
      if (wSum != 0 && uSum != 0) {
        coeff = std::sqrt(wSum) / std::sqrt(uSum);
        if (coeff > hp.maxCoeff) coeff = hp.maxCoeff;
        if (coeff < hp.minCoeff) coeff = hp.minCoeff;
      }
      coeffs.push_back(coeff);
      for (size_t k = 0; k < spec.numel; ++k) p[spec.offset + k] -= stepSize * coeff * u[k];
    }
  }
};

LambParams baseParams() {
  LambParams p;
  p.lr = 0.02;
  p.weightDecay = 0.05;
  return p;
}

}  // namespace

TEST_CASE("lamb: matches a double reference of DeepSpeed's FusedLamb rule", "[optim][lamb]") {
  const std::vector<ParamSpec> specs =
      makeSpecs({{12, true}, {5, false}, {30, true}, {1, false}, {9, true}});
  struct Row {
    const char* name;
    void (*tweak)(LambParams&);
    int clamped;  // 0: no tensor clamped, +1: all at max_coeff, -1: all at min_coeff
  };
  const std::vector<Row> rows = {
      {"defaults + weight decay groups", [](LambParams&) {}, 0},
      {"eps inside sqrt",
       [](LambParams& p) {
         p.epsInsideSqrt = true;
         p.eps = 1e-3;
       },
       0},
      {"eps outside sqrt, large eps", [](LambParams& p) { p.eps = 1e-3; }, 0},
      {"no bias correction", [](LambParams& p) { p.biasCorrection = false; }, 0},
      {"betas",
       [](LambParams& p) {
         p.beta1 = 0.8;
         p.beta2 = 0.95;
       },
       0},
      // Bounds outside the ratios this data produces, except the one-element tensor's ratio
      // (|u| can come near 0 there), which is left to the reference comparison.
      {"clamped at max_coeff",
       [](LambParams& p) {
         p.maxCoeff = 0.001;
         p.minCoeff = 0.0001;
       },
       +1},
      {"clamped at min_coeff",
       [](LambParams& p) {
         p.minCoeff = 1000;
         p.maxCoeff = 10000;
       },
       -1},
  };
  for (const Row& row : rows) {
    INFO(row.name);
    LambParams params = baseParams();
    row.tweak(params);
    std::vector<float> p = initialParams(specs);
    Lamb lamb(params, specs, 0, p.size());
    ReferenceLamb ref(params, specs, p);
    for (int s = 0; s < 20; ++s) {
      const std::vector<float> g = gradients(p.size(), s);
      const double lr = params.lr * (1.0 + 0.3 * std::cos(0.5 * s));
      lamb.step(p.data(), g.data(), stepAt(lr));
      ref.step(g, lr);
      INFO("step " << s);
      REQUIRE(lamb.lastCoefficients().size() == specs.size());
      for (size_t t = 0; t < specs.size(); ++t) {
        INFO("tensor " << t);
        CHECK(lamb.lastCoefficients()[t] == Approx(ref.coeffs[t]).epsilon(1e-5));
        if (s == 0 && t == 1) CHECK(lamb.lastCoefficients()[t] == 1.0f);  // ||p|| = 0
        if (s > 0 && row.clamped > 0) CHECK(lamb.lastCoefficients()[t] == float(params.maxCoeff));
        if (s > 0 && row.clamped < 0 && specs[t].numel > 1)
          CHECK(lamb.lastCoefficients()[t] == float(params.minCoeff));
      }
    }
    for (size_t j = 0; j < p.size(); ++j) {
      INFO("element " << j << ": ours " << p[j] << ", reference " << ref.p[j]);
      REQUIRE(std::fabs(p[j] - ref.p[j]) <= 1e-5 * std::max(std::fabs(ref.p[j]), 1e-2));
    }
    REQUIRE(lamb.steps() == 20);
  }
}

TEST_CASE("lamb: a tensor with zero parameters and zero gradients keeps ratio 1 and stays zero",
          "[optim][lamb]") {
  const std::vector<ParamSpec> specs = makeSpecs({{4, true}, {3, true}});
  std::vector<float> p = {1, 2, 3, 4, 0, 0, 0};
  std::vector<float> g = {0.5f, -0.5f, 1, 2, 0, 0, 0};
  Lamb lamb(baseParams(), specs, 0, p.size());
  lamb.step(p.data(), g.data(), stepAt(0.1));
  CHECK(lamb.lastCoefficients()[1] == 1.0f);
  CHECK(p[4] == 0.0f);
  CHECK(p[6] == 0.0f);
  CHECK(p[0] != 1.0f);
}

TEST_CASE("lamb: 1-4 shards summing partial norms across ranks equal the unsharded run",
          "[optim][lamb]") {
  // Sizes chosen so cuts fall inside tensors and some shards miss whole tensors.
  const std::vector<ParamSpec> specs =
      makeSpecs({{13, true}, {4, false}, {29, true}, {2, false}, {7, true}, {1, false}});
  const size_t n = specs.back().offset + specs.back().numel;
  const int steps = 12;
  LambParams params = baseParams();
  params.maxCoeff = 2.0;  // some ratios clamp, others not

  std::vector<float> whole = initialParams(specs);
  Lamb single(params, specs, 0, n);
  for (int s = 0; s < steps; ++s) {
    const std::vector<float> g = gradients(n, s);
    single.step(whole.data(), g.data(), stepAt(params.lr));
  }

  for (int shards = 1; shards <= 4; ++shards) {
    INFO(shards << " shards");
    std::vector<size_t> cuts;
    for (int r = 0; r <= shards; ++r) cuts.push_back(n * r / shards);
    std::vector<float> split = initialParams(specs);
    std::vector<std::vector<double>> partials(shards);
    std::vector<int> calls(shards, 0);
    std::vector<size_t> counts(shards, 0);
    std::barrier sync(shards);
    std::vector<std::unique_ptr<Lamb>> ranks;
    for (int r = 0; r < shards; ++r)
      ranks.push_back(std::make_unique<Lamb>(params, specs, cuts[r], cuts[r + 1]));

    auto rank = [&](int r) {
      OptimizerStep step;
      step.lr = params.lr;
      // An in-process all_reduce: publish, wait, add in rank order (identical on every rank),
      // wait again before the slots may be overwritten.
      step.sumAcrossShards = [&, r](double* values, size_t count) {
        ++calls[r];
        counts[r] = count;
        partials[r].assign(values, values + count);
        sync.arrive_and_wait();
        for (size_t i = 0; i < count; ++i) {
          double total = 0;
          for (int q = 0; q < shards; ++q) total += partials[q][i];
          values[i] = total;
        }
        sync.arrive_and_wait();
      };
      for (int s = 0; s < steps; ++s) {
        const std::vector<float> g = gradients(n, s);
        ranks[r]->step(split.data() + cuts[r], g.data() + cuts[r], step);
      }
    };
    ds::test::onThreads(shards, rank);

    for (int r = 0; r < shards; ++r) {
      CHECK(calls[r] == steps);  // once per step, all tensors in one call
      CHECK(counts[r] == 2 * specs.size());
      CHECK(ranks[r]->lastCoefficients() == single.lastCoefficients());
    }
    // Every square is exact in double, so only the order of additions differs from the unsharded
    // sum; the fp32 ratios and hence the parameters come out bitwise equal.
    REQUIRE(split == whole);
  }
}
