// Adam/AdamW against a double-precision reference of PyTorch's update rule, weight-decay groups,
// partition ranges; WarmupLR's values at every step as DeepSpeed's engine applies them.
#include <catch2/catch.hpp>
#include <cmath>

#include "runtime/lr/warmup_lr.h"
#include "runtime/optim/adam.h"

using namespace ds::runtime;

namespace {

// torch.optim.AdamW (decoupled) / Adam (L2) for one element, in double.
struct ReferenceAdam {
  double p, m = 0, v = 0;
  int t = 0;
  void step(double g, double lr, const AdamParams& a, bool decay) {
    ++t;
    const double wd = decay ? a.weightDecay : 0.0;
    if (a.adamWMode)
      p *= 1 - lr * wd;
    else
      g += wd * p;
    m = a.beta1 * m + (1 - a.beta1) * g;
    v = a.beta2 * v + (1 - a.beta2) * g * g;
    const double bc1 = 1 - std::pow(a.beta1, t), bc2 = 1 - std::pow(a.beta2, t);
    p -= lr / bc1 * m / (std::sqrt(v) / std::sqrt(bc2) + a.eps);
  }
};

}  // namespace

TEST_CASE("adam: matches the reference in both weight-decay modes, decaying only marked groups") {
  for (bool adamW : {true, false}) {
    INFO("adam_w_mode " << adamW);
    AdamParams params;
    params.lr = 0.05;
    params.weightDecay = 0.1;
    params.adamWMode = adamW;
    const std::vector<ParamSpec> specs = {{"w", {3}, true, 0, 3}, {"b", {2}, false, 3, 2}};
    Adam adam(params, specs, 0, 5);
    std::vector<float> p = {1.0f, -2.0f, 0.5f, 0.25f, -0.75f};
    std::vector<ReferenceAdam> ref;
    for (float x : p) ref.push_back({x});
    for (int step = 0; step < 25; ++step) {
      std::vector<float> g(5);
      for (int i = 0; i < 5; ++i) g[i] = std::sin(0.7f * step + i) + 0.1f * i;
      adam.step(p.data(), g.data(), params.lr);
      for (int i = 0; i < 5; ++i) ref[i].step(g[i], params.lr, params, i < 3);
    }
    for (int i = 0; i < 5; ++i) {
      INFO("element " << i << " got " << p[i] << " want " << ref[i].p);
      CHECK(p[i] == Approx(ref[i].p).epsilon(1e-6));
    }
    REQUIRE(adam.steps() == 25);
  }
}

TEST_CASE(
    "adam: a partition range keeps state for its elements only and honours groups across it") {
  AdamParams params;
  params.weightDecay = 0.5;
  params.lr = 0.1;
  const std::vector<ParamSpec> specs = {{"w", {4}, true, 0, 4}, {"b", {4}, false, 4, 4}};
  Adam shard(params, specs, 2, 6);  // two decayed elements, two not
  REQUIRE(shard.stateBytes() == 4 * 2 * sizeof(float));
  std::vector<float> p(4, 1.0f), g(4, 0.0f);
  shard.step(p.data(), g.data(), params.lr);
  // Zero gradient: only decoupled decay moves the weights, and only the decayed group.
  REQUIRE(p[0] == Approx(0.95f));
  REQUIRE(p[1] == Approx(0.95f));
  REQUIRE(p[2] == 1.0f);
  REQUIRE(p[3] == 1.0f);
}

TEST_CASE("WarmupLR: update 0 uses warmup_min_lr, update i the value of scheduler iteration i-1") {
  WarmupLrParams params;
  params.warmupMinLr = 0.001;
  params.warmupMaxLr = 0.011;
  params.warmupNumSteps = 10;
  for (WarmupType type : {WarmupType::Log, WarmupType::Linear}) {
    params.warmupType = type;
    WarmupLr schedule(params);
    std::vector<double> applied;
    for (int update = 0; update < 14; ++update) {
      applied.push_back(schedule.lr());
      schedule.step();
    }
    REQUIRE(applied[0] == Approx(0.001));
    for (int i = 1; i < 14; ++i) {
      const int iteration = i - 1;
      double gamma = 1.0;
      if (iteration < 10)
        gamma =
            type == WarmupType::Log ? std::log(iteration + 1.0) / std::log(10.0) : iteration / 10.0;
      INFO("update " << i);
      REQUIRE(applied[i] == Approx(0.001 + 0.01 * gamma));
    }
    REQUIRE(applied[1] == Approx(0.001));  // DeepSpeed's oddity: the first two updates both use min
    REQUIRE(applied[13] == Approx(0.011));
  }
}

TEST_CASE("WarmupLR: warmup_num_steps below 2 behaves as 2, as in DeepSpeed") {
  WarmupLrParams params;
  params.warmupMinLr = 0.0;
  params.warmupMaxLr = 1.0;
  params.warmupNumSteps = 1;
  params.warmupType = WarmupType::Linear;
  WarmupLr schedule(params);
  schedule.step();
  REQUIRE(schedule.lr() == Approx(0.0));
  schedule.step();
  REQUIRE(schedule.lr() == Approx(0.5));
  schedule.step();
  REQUIRE(schedule.lr() == Approx(1.0));
}
