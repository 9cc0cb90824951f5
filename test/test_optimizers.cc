// Adam, AdamW and SGD against PyTorch itself (test/reference/torch_optimizers.py under
// /usr/bin/python3 with torch; skipped with a warning where torch is missing), Adam against a
// double-precision reference, shard ranges, and for every optimizer: checkpoint round trip
// (stateArrays + setSteps) and the momentum override.
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"
#include "runtime/optim/adam.h"
#include "runtime/optim/make_optimizer.h"
#include "test/torch_python.h"
#include "test/param_table.h"
#include "test/scratch_dir.h"
#include "test/skip.h"

using namespace ds::runtime;
using ds::test::makeSpecs;
using ds::test::stepAt;
using Json = nlohmann::json;

namespace {

size_t totalElements(const std::vector<ParamSpec>& specs) {
  return specs.back().offset + specs.back().numel;
}

std::string python() { return ds::test::torchPython(); }

// Deterministic, varied gradients; exact zeros now and then.
std::vector<float> gradients(size_t n, int step) {
  std::vector<float> g(n);
  for (size_t i = 0; i < n; ++i)
    g[i] =
        (i + step) % 11 == 0 ? 0.0f : std::sin(0.37f * i + 1.3f * step) * (1.0f + 0.1f * (i % 5));
  return g;
}

std::vector<float> initialParams(size_t n) {
  std::vector<float> p(n);
  for (size_t i = 0; i < n; ++i) p[i] = std::cos(0.71f * i) * 0.8f;
  return p;
}

OptimizerConfig adamConfig(OptimizerType type, bool adamW, double wd) {
  OptimizerConfig c;
  c.type = type;
  AdamParams a;
  a.lr = 0.01;
  a.weightDecay = wd;
  a.adamWMode = adamW;
  c.params = a;
  return c;
}

OptimizerConfig sgdConfig(double momentum, double dampening, bool nesterov, double wd) {
  OptimizerConfig c;
  c.type = OptimizerType::SGD;
  SgdParams s;
  s.lr = 0.05;
  s.momentum = momentum;
  s.dampening = dampening;
  s.nesterov = nesterov;
  s.weightDecay = wd;
  c.params = s;
  return c;
}

OptimizerConfig lambConfig() {
  OptimizerConfig c;
  c.type = OptimizerType::Lamb;
  LambParams l;
  l.lr = 0.01;
  l.weightDecay = 0.05;
  c.params = l;
  return c;
}

// Every optimizer kind the round-trip and override tests run over.
std::vector<std::pair<std::string, OptimizerConfig>> allConfigs() {
  return {{"Adam (L2)", adamConfig(OptimizerType::Adam, false, 0.1)},
          {"AdamW", adamConfig(OptimizerType::AdamW, true, 0.1)},
          {"Lamb", lambConfig()},
          {"SGD", sgdConfig(0.0, 0.0, false, 0.01)},
          {"SGD momentum + dampening", sgdConfig(0.9, 0.2, false, 0.01)},
          {"SGD nesterov", sgdConfig(0.9, 0.0, true, 0.01)}};
}

bool torchAvailable() {
  const std::string cmd = python() + " -c 'import torch' >/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0;
}

// Runs the reference script on `input`; returns its JSON output or fails the test with stderr.
Json runTorchReference(const Json& input) {
  const std::filesystem::path dir = ds::test::makeScratchDir("torch-optim");
  const auto inPath = dir / "input.json", errPath = dir / "stderr";
  std::ofstream(inPath) << input.dump();
  const std::string cmd = python() + " " + DS_SOURCE_DIR + "/test/reference/torch_optimizers.py " +
                          inPath.string() + " 2>" + errPath.string();
  FILE* pipe = popen(cmd.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string out;
  char buffer[65536];
  for (size_t n; (n = fread(buffer, 1, sizeof(buffer), pipe)) > 0;) out.append(buffer, n);
  const int status = pclose(pipe);
  std::ifstream errFile(errPath);
  const std::string err((std::istreambuf_iterator<char>(errFile)), {});
  INFO(cmd << "\nstderr:\n" << err);
  REQUIRE(status == 0);
  return Json::parse(out);
}

std::vector<float> floats(const Json& array) {
  std::vector<float> v;
  for (const Json& x : array) v.push_back(static_cast<float>(x.get<double>()));
  return v;
}

}  // namespace

TEST_CASE("optimizers: Adam, AdamW and SGD equal torch.optim on the same inputs",
          "[optim][torch]") {
  if (ds::test::skipUnless(torchAvailable(), python() +
                                                 " cannot import torch; the PyTorch reference "
                                                 "comparison needs it (install python3-torch)"))
    return;
  const std::vector<std::pair<size_t, bool>> tensors = {{13, true}, {4, false}, {31, true},
                                                        {1, false}, {17, true}, {6, false}};
  const std::vector<ParamSpec> specs = makeSpecs(tensors);
  const int steps = 20;
  std::vector<double> lrs, momentums;
  for (int s = 0; s < steps; ++s) {
    lrs.push_back(0.01 * (1.0 + 0.5 * std::sin(0.4 * s)));          // lr changes every step
    momentums.push_back(0.9 - 0.1 * std::fabs(std::sin(0.3 * s)));  // OneCycle-like
  }
  struct Case {
    std::string name, torchName;
    Json kwargs;
    double weightDecay;
    OptimizerConfig config;
    bool cycleMomentum;
  };
  auto adam = [](OptimizerType type, double beta1, double beta2, double eps, double wd) {
    OptimizerConfig c;
    c.type = type;
    AdamParams a;
    a.beta1 = beta1;
    a.beta2 = beta2;
    a.eps = eps;
    a.weightDecay = wd;
    a.adamWMode = type == OptimizerType::AdamW;
    c.params = a;
    return c;
  };
  const std::vector<Case> cases = {
      {"Adam, L2 weight decay",
       "Adam",
       {{"betas", {0.9, 0.999}}, {"eps", 1e-8}},
       0.1,
       adam(OptimizerType::Adam, 0.9, 0.999, 1e-8, 0.1),
       false},
      {"AdamW",
       "AdamW",
       {{"betas", {0.8, 0.99}}, {"eps", 1e-6}},
       0.05,
       adam(OptimizerType::AdamW, 0.8, 0.99, 1e-6, 0.05),
       false},
      {"AdamW, cycled beta1",
       "AdamW",
       {{"betas", {0.9, 0.999}}, {"eps", 1e-8}},
       0.01,
       adam(OptimizerType::AdamW, 0.9, 0.999, 1e-8, 0.01),
       true},
      {"SGD", "SGD", Json::object(), 0.01, sgdConfig(0.0, 0.0, false, 0.01), false},
      {"SGD momentum + dampening",
       "SGD",
       {{"momentum", 0.9}, {"dampening", 0.1}},
       0.01,
       sgdConfig(0.9, 0.1, false, 0.01),
       false},
      {"SGD nesterov",
       "SGD",
       {{"momentum", 0.8}, {"nesterov", true}},
       0.1,
       sgdConfig(0.8, 0.0, true, 0.1),
       false},
      {"SGD, cycled momentum",
       "SGD",
       {{"momentum", 0.9}},
       0.0,
       sgdConfig(0.9, 0.0, false, 0.0),
       true},
  };
  Json input = {{"cases", Json::array()}};
  for (size_t i = 0; i < cases.size(); ++i) {
    Json t = Json::array();
    for (const auto& [numel, decay] : tensors) t.push_back({{"numel", numel}, {"decay", decay}});
    input["cases"].push_back({{"name", cases[i].name},
                              {"optimizer", cases[i].torchName},
                              {"kwargs", cases[i].kwargs},
                              {"weight_decay", cases[i].weightDecay},
                              {"tensors", t},
                              {"seed", 1000 + i},
                              {"lr", lrs},
                              {"momentum", cases[i].cycleMomentum ? Json(momentums) : Json()}});
  }
  const Json reference = runTorchReference(input);
  INFO("torch " << reference["torch"].get<std::string>());
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const Json& ref = reference["cases"][i];
    INFO(c.name);
    std::vector<float> params = floats(ref["initial"]);
    REQUIRE(params.size() == totalElements(specs));
    const auto opt = makeOptimizer(c.config, specs, 0, params.size());
    for (int s = 0; s < steps; ++s) {
      const std::vector<float> g = floats(ref["grads"][s]);
      OptimizerStep step;
      step.lr = lrs[s];
      if (c.cycleMomentum) step.momentum = momentums[s];
      opt->step(params.data(), g.data(), step);
    }
    const std::vector<float> want = floats(ref["final"]);
    // fp32 rounding only: torch may fuse multiply-adds in its vector loops, we do not.
    double worst = 0;
    for (size_t j = 0; j < want.size(); ++j) {
      const double err =
          std::fabs(double(params[j]) - want[j]) / std::max(std::fabs(want[j]), 1e-2f);
      worst = std::max(worst, err);
      INFO("element " << j << ": ours " << params[j] << ", torch " << want[j]);
      REQUIRE(err <= 1e-6);
    }
    CHECK(opt->steps() == steps);
    UNSCOPED_INFO(c.name << ": worst relative difference to torch " << worst);
  }
}

// torch.optim.AdamW (decoupled) / Adam (L2) for one element, in double.
namespace {
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
    const double bc1 = a.biasCorrection ? 1 - std::pow(a.beta1, t) : 1.0;
    const double bc2 = a.biasCorrection ? 1 - std::pow(a.beta2, t) : 1.0;
    p -= lr / bc1 * m / (std::sqrt(v) / std::sqrt(bc2) + a.eps);
  }
};
}  // namespace

TEST_CASE("adam: double reference in both decay modes and without bias correction", "[optim]") {
  for (bool adamW : {true, false})
    for (bool biasCorrection : {true, false}) {
      INFO("adam_w_mode " << adamW << ", bias_correction " << biasCorrection);
      AdamParams params;
      params.lr = 0.05;
      params.weightDecay = 0.1;
      params.adamWMode = adamW;
      params.biasCorrection = biasCorrection;
      const std::vector<ParamSpec> specs = {{"w", {3}, true, 0, 3}, {"b", {2}, false, 3, 2}};
      Adam adam(params, specs, 0, 5);
      std::vector<float> p = {1.0f, -2.0f, 0.5f, 0.25f, -0.75f};
      std::vector<ReferenceAdam> ref;
      for (float x : p) ref.push_back({x});
      for (int step = 0; step < 25; ++step) {
        std::vector<float> g(5);
        for (int i = 0; i < 5; ++i) g[i] = std::sin(0.7f * step + i) + 0.1f * i;
        adam.step(p.data(), g.data(), stepAt(params.lr));
        for (int i = 0; i < 5; ++i) ref[i].step(g[i], params.lr, params, i < 3);
      }
      for (int i = 0; i < 5; ++i) {
        INFO("element " << i << " got " << p[i] << " want " << ref[i].p);
        CHECK(p[i] == Approx(ref[i].p).epsilon(1e-6));
      }
      REQUIRE(adam.steps() == 25);
    }
}

TEST_CASE("adam: a shard range keeps state for its elements only and honours groups across it",
          "[optim]") {
  AdamParams params;
  params.weightDecay = 0.5;
  params.lr = 0.1;
  const std::vector<ParamSpec> specs = {{"w", {4}, true, 0, 4}, {"b", {4}, false, 4, 4}};
  Adam shard(params, specs, 2, 6);  // two decayed elements, two not
  REQUIRE(shard.stateBytes() == 4 * 2 * sizeof(float));
  std::vector<float> p(4, 1.0f), g(4, 0.0f);
  shard.step(p.data(), g.data(), stepAt(params.lr));
  // Zero gradient: only decoupled decay moves the weights, and only the decayed group.
  REQUIRE(p[0] == Approx(0.95f));
  REQUIRE(p[1] == Approx(0.95f));
  REQUIRE(p[2] == 1.0f);
  REQUIRE(p[3] == 1.0f);
}

TEST_CASE("optimizers: contiguous shards of the flat buffer together equal the whole", "[optim]") {
  // Lamb has its own sharding test (test_lamb.cc): its shards must talk.
  const std::vector<ParamSpec> specs = makeSpecs({{7, true}, {3, false}, {11, true}, {5, false}});
  const size_t n = totalElements(specs);
  for (const auto& [name, config] : allConfigs()) {
    if (config.type == OptimizerType::Lamb) continue;
    INFO(name);
    std::vector<float> whole = initialParams(n), split = whole;
    const auto single = makeOptimizer(config, specs, 0, n);
    const std::vector<size_t> cuts = {0, 5, 6, 15, n};  // through the middle of tensors
    std::vector<std::unique_ptr<Optimizer>> shards;
    for (size_t s = 0; s + 1 < cuts.size(); ++s)
      shards.push_back(makeOptimizer(config, specs, cuts[s], cuts[s + 1]));
    for (int step = 0; step < 10; ++step) {
      const std::vector<float> g = gradients(n, step);
      single->step(whole.data(), g.data(), stepAt(0.02));
      for (size_t s = 0; s < shards.size(); ++s)
        shards[s]->step(split.data() + cuts[s], g.data() + cuts[s], stepAt(0.02));
    }
    REQUIRE(split == whole);
  }
}

TEST_CASE("optimizers: saved state + setSteps continues exactly like the uninterrupted run",
          "[optim][checkpoint]") {
  const std::vector<ParamSpec> specs = makeSpecs({{9, true}, {4, false}, {14, true}});
  const size_t n = totalElements(specs), begin = 3, end = n - 2;  // a shard, not the whole
  const int half = 6;
  for (const auto& [name, config] : allConfigs()) {
    INFO(name);
    auto runSteps = [&](Optimizer& opt, std::vector<float>& p, int from, int to) {
      for (int s = from; s < to; ++s) {
        const std::vector<float> g = gradients(n, s);
        opt.step(p.data() + begin, g.data() + begin, stepAt(0.01 * (1 + s % 3)));
      }
    };
    std::vector<float> straight = initialParams(n);
    const auto reference = makeOptimizer(config, specs, begin, end);
    runSteps(*reference, straight, 0, 2 * half);

    std::vector<float> resumed = initialParams(n);
    const auto first = makeOptimizer(config, specs, begin, end);
    runSteps(*first, resumed, 0, half);
    std::vector<std::vector<float>> saved;
    for (const auto& a : first->stateArrays()) saved.emplace_back(a.data, a.data + a.count);

    auto restore = [&](bool withSteps) {
      auto opt = makeOptimizer(config, specs, begin, end);
      const auto arrays = opt->stateArrays();
      REQUIRE(arrays.size() == saved.size());
      for (size_t i = 0; i < arrays.size(); ++i) {
        REQUIRE(arrays[i].name == first->stateArrays()[i].name);
        REQUIRE(arrays[i].count == end - begin);
        std::copy(saved[i].begin(), saved[i].end(), arrays[i].data);
      }
      if (withSteps) opt->setSteps(first->steps());
      return opt;
    };
    std::vector<float> withoutSteps = resumed;
    const auto second = restore(true);
    runSteps(*second, resumed, half, 2 * half);
    REQUIRE(second->steps() == 2 * half);
    REQUIRE(resumed == straight);
    const auto a = second->stateArrays(), b = reference->stateArrays();
    for (size_t i = 0; i < a.size(); ++i)
      REQUIRE(std::vector<float>(a[i].data, a[i].data + a[i].count) ==
              std::vector<float>(b[i].data, b[i].data + b[i].count));

    // The step count is state too (bias correction, SGD's first-step buffer): leaving it out
    // changes the result, except for plain SGD, which has no state at all.
    const auto forgetful = restore(false);
    runSteps(*forgetful, withoutSteps, half, 2 * half);
    if (saved.empty()) {
      CHECK(withoutSteps == straight);
    } else {
      CHECK(withoutSteps != straight);
    }
  }
}

TEST_CASE("optimizers: OptimizerStep::momentum replaces beta1 / SGD momentum for that step",
          "[optim]") {
  const std::vector<ParamSpec> specs = makeSpecs({{8, true}, {5, false}});
  const size_t n = totalElements(specs);
  auto withMomentum = [](OptimizerConfig c, double m) {
    if (auto* a = std::get_if<AdamParams>(&c.params)) a->beta1 = m;
    if (auto* l = std::get_if<LambParams>(&c.params)) l->beta1 = m;
    if (auto* s = std::get_if<SgdParams>(&c.params)) s->momentum = m;
    return c;
  };
  for (const auto& [name, config] : allConfigs()) {
    if (config.momentum() == 0.0) continue;  // plain SGD: checked below
    INFO(name);
    // Override 0.7 on a 0.9-configured optimizer == an optimizer configured with 0.7.
    const auto overridden = makeOptimizer(config, specs, 0, n);
    const auto configured = makeOptimizer(withMomentum(config, 0.7), specs, 0, n);
    const auto plain = makeOptimizer(config, specs, 0, n);
    std::vector<float> a = initialParams(n), b = a, c = a;
    for (int s = 0; s < 5; ++s) {
      const std::vector<float> g = gradients(n, s);
      const OptimizerStep step = stepAt(0.01, 0.7);
      overridden->step(a.data(), g.data(), step);
      configured->step(b.data(), g.data(), stepAt(0.01));
      plain->step(c.data(), g.data(), stepAt(0.01));
    }
    REQUIRE(a == b);
    REQUIRE(a != c);
  }
  // SGD configured without momentum has no buffer to cycle: a clear error, not a silent no-op.
  const auto sgd = makeOptimizer(sgdConfig(0.0, 0.0, false, 0.0), specs, 0, n);
  std::vector<float> p = initialParams(n);
  const std::vector<float> g = gradients(n, 0);
  REQUIRE_THROWS_WITH(sgd->step(p.data(), g.data(), stepAt(0.01, 0.9)),
                      Catch::Contains("but optimizer.params.momentum is 0, so there is no momentum "
                                      "buffer; set optimizer.params.momentum > 0"));
  REQUIRE_NOTHROW(sgd->step(p.data(), g.data(), stepAt(0.01, 0.0)));
}

TEST_CASE("optimizers: OptimizerStep::beta2 replaces beta2 for Adam and Lamb (OneCycle's 0.99)",
          "[optim]") {
  const std::vector<ParamSpec> specs = makeSpecs({{8, true}, {5, false}});
  const size_t n = totalElements(specs);
  for (const auto& [name, config] : allConfigs()) {
    OptimizerConfig with099 = config;
    if (auto* a = std::get_if<AdamParams>(&with099.params))
      a->beta2 = 0.99;
    else if (auto* l = std::get_if<LambParams>(&with099.params))
      l->beta2 = 0.99;
    else
      continue;  // SGD has no beta2
    INFO(name);
    const auto overridden = makeOptimizer(config, specs, 0, n);
    const auto configured = makeOptimizer(with099, specs, 0, n);
    const auto plain = makeOptimizer(config, specs, 0, n);
    std::vector<float> a = initialParams(n), b = a, c = a;
    for (int s = 0; s < 5; ++s) {
      const std::vector<float> g = gradients(n, s);
      OptimizerStep step = stepAt(0.01);
      step.beta2 = 0.99;
      overridden->step(a.data(), g.data(), step);
      configured->step(b.data(), g.data(), stepAt(0.01));
      plain->step(c.data(), g.data(), stepAt(0.01));
    }
    REQUIRE(a == b);
    REQUIRE(a != c);
  }
}
