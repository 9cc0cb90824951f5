// 1-bit LAMB (runtime/optim/onebit_lamb.h) on 1, 2 and 4 ranks (threads over shared memory)
// against a plain reference of DeepSpeed's rules (onebit/lamb.py) on the same gradients across
// the freeze boundary: LAMB without bias correction on the averaged gradients whose clamped trust
// ratios feed each tensor's frozen coefficient; then each rank's momentum, scaled per tensor to a
// common magnitude, averaged by the compressed all-reduce (test/onebit_reference.h), the fresh
// variance updated from the gradient it implies, and the update scaled by the frozen coefficient
// times the clamped factor. Also: the per-tensor values survive a checkpoint (tensorScalars).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <memory>
#include <vector>

#include "common/error.h"
#include "runtime/optim/onebit_lamb.h"
#include "test/float_arrays.h"
#include "test/gpt_parallel_harness.h"
#include "test/onebit_reference.h"
#include "test/rank_threads.h"

using namespace ds;
using namespace ds::runtime;

namespace {

constexpr size_t kCount = 300;

std::vector<ParamSpec> table() {  // a decaying weight and a bias, 300 elements in all
  return {ParamSpec{"w", {20, 10}, true, 0, 200}, ParamSpec{"b", {100}, false, 200, 100}};
}

OneBitLambParams testParams() {
  OneBitLambParams p;
  p.lr = 0.01;
  p.beta1 = 0.9;
  p.beta2 = 0.99;
  p.weightDecay = 0.1;
  p.freezeStep = 4;
  p.minCoeff = 0.01;
  p.maxCoeff = 0.3;  // so the clamp acts on some steps
  p.factorThreshold = 0.05;
  return p;
}

struct Span {  // one tensor of the table
  size_t begin, end;
  float decay;
};
const Span kTensors[] = {{0, 200, 0.1f}, {200, 300, 0.0f}};

// One rank's state in the reference, DeepSpeed's names.
struct ReferenceRank {
  std::vector<float> params, expAvg, expAvgSq, expAvgSqFresh;
  double lambCoeffFreeze[2] = {0, 0}, lastFactor[2] = {1, 1}, scalingCoeff[2] = {0, 0};
};

}  // namespace

TEST_CASE(
    "1-bit LAMB: LAMB until freeze_step, then the compressed momentum with the frozen "
    "coefficients and the clamped factor, as DeepSpeed's rules",
    "[optim][onebit]") {
  const OneBitLambParams p = testParams();
  const std::vector<ParamSpec> specs = table();
  constexpr int kSteps = 10;
  const float b1 = 0.9f, b2 = 0.99f, lr = 0.01f, eps = 1e-8f;
  for (int n : {1, 2, 4}) {
    INFO(n << " ranks");
    auto group = test::shmGroup(n);
    std::vector<std::unique_ptr<OneBitLamb>> optimizers;
    for (int r = 0; r < n; ++r)
      optimizers.push_back(std::make_unique<OneBitLamb>(p, specs, 0, kCount));
    std::vector<std::vector<float>> params(n, test::randoms(kCount, 99));
    std::vector<ReferenceRank> ref(n);
    for (ReferenceRank& s : ref) {
      s.params = params[0];
      s.expAvg = s.expAvgSq = s.expAvgSqFresh = std::vector<float>(kCount, 0.0f);
    }
    std::vector<test::OneBitErrors> errors(n);
    for (auto& e : errors) e.reset(kCount, n);
    bool clamped = false, factorMoved = false;
    for (int t = 1; t <= kSteps; ++t) {
      INFO("step " << t);
      const bool compressed = t > p.freezeStep;
      const test::StepGradients drawn = test::stepGradients(n, t, kCount);
      const std::vector<std::vector<float>>& local = drawn.local;
      const std::vector<float>& average = drawn.average;
      for (int r = 0; r < n; ++r) REQUIRE(optimizers[r]->takesLocalGradients() == compressed);
      test::onThreads(n, [&](int r) {
        OptimizerStep s;
        s.lr = p.lr;
        s.dataGroup = &group[r];
        optimizers[r]->step(params[r].data(), (compressed ? local[r] : average).data(), s);
      });

      if (!compressed) {
        for (ReferenceRank& s : ref) {
          for (size_t i = 0; i < kCount; ++i) {
            s.expAvg[i] = b1 * s.expAvg[i] + (1.0f - b1) * average[i];
            s.expAvgSq[i] = b2 * s.expAvgSq[i] + (1.0f - b2) * average[i] * average[i];
          }
          if (t == p.freezeStep) s.expAvgSqFresh = s.expAvgSq;
          for (int k = 0; k < 2; ++k) {
            const Span& x = kTensors[k];
            double weightNorm = 0, updateNorm = 0;
            for (size_t i = x.begin; i < x.end; ++i) {
              const float u =
                  s.expAvg[i] / (std::sqrt(s.expAvgSq[i]) + eps) + x.decay * s.params[i];
              weightNorm += static_cast<double>(s.params[i]) * s.params[i];
              updateNorm += static_cast<double>(u) * u;
            }
            double coeff = 1.0;
            if (weightNorm != 0 && updateNorm != 0) {
              coeff = std::sqrt(weightNorm / updateNorm);
              if (coeff > p.maxCoeff) coeff = p.maxCoeff, clamped = true;
              if (coeff < p.minCoeff) coeff = p.minCoeff;
            }
            if (coeff != 1.0) s.lambCoeffFreeze[k] = 0.9 * s.lambCoeffFreeze[k] + (1 - 0.9) * coeff;
            const auto scale = static_cast<float>(p.lr * coeff);
            for (size_t i = x.begin; i < x.end; ++i)
              s.params[i] -=
                  scale * (s.expAvg[i] / (std::sqrt(s.expAvgSq[i]) + eps) + x.decay * s.params[i]);
          }
        }
      } else {
        std::vector<std::vector<float>> last(n), momentum(n);
        for (int r = 0; r < n; ++r) {
          ReferenceRank& s = ref[r];
          if (s.scalingCoeff[0] == 0) {  // DeepSpeed's united scale over the tensors
            double scales[2];
            for (int k = 0; k < 2; ++k) {
              const Span& x = kTensors[k];
              double squares = 0;
              for (size_t i = x.begin; i < x.end; ++i)
                squares += static_cast<double>(s.expAvg[i]) * s.expAvg[i];
              scales[k] = std::sqrt(squares / static_cast<double>(x.end - x.begin));
            }
            for (int k = 0; k < 2; ++k) s.scalingCoeff[k] = (scales[0] + scales[1]) / 2 / scales[k];
          }
          last[r] = s.expAvg;
          for (int k = 0; k < 2; ++k)
            for (size_t i = kTensors[k].begin; i < kTensors[k].end; ++i)
              s.expAvg[i] = (b1 * s.expAvg[i] + (1.0f - b1) * local[r][i]) *
                            static_cast<float>(s.scalingCoeff[k]);
          momentum[r] = s.expAvg;
        }
        if (n > 1) test::referenceOneBitAllReduce(momentum, errors);
        for (int r = 0; r < n; ++r) {
          ReferenceRank& s = ref[r];
          s.expAvg = momentum[r];
          for (int k = 0; k < 2; ++k) {
            const Span& x = kTensors[k];
            double factor = 0, prelimNorm = 0, updateNorm = 0;
            for (size_t i = x.begin; i < x.end; ++i) {
              s.expAvg[i] /= static_cast<float>(s.scalingCoeff[k]);
              const float g = (s.expAvg[i] - last[r][i] * b1) / (1.0f - b1);
              s.expAvgSqFresh[i] = b2 * s.expAvgSqFresh[i] + (1.0f - b2) * g * g;
              const float denom = std::sqrt(s.expAvgSq[i]) + eps;
              const float prelim = s.expAvg[i] / denom, update = prelim + x.decay * s.params[i];
              factor = std::max(factor,
                                static_cast<double>(denom / (std::sqrt(s.expAvgSqFresh[i]) + eps)));
              prelimNorm += static_cast<double>(prelim) * prelim;
              updateNorm += static_cast<double>(update) * update;
            }
            if (x.decay > 0) {
              const double ratio = std::min(1.0, std::sqrt(prelimNorm / updateNorm));
              factor = factor * ratio + (1.0 - ratio);
            }
            if (factor > p.factorMax) factor = p.factorMax;
            if (factor < p.factorMin) factor = p.factorMin;
            if (factor > s.lastFactor[k] * (1.0 + p.factorThreshold))
              factor = s.lastFactor[k] * (1.0 + p.factorThreshold);
            if (factor < s.lastFactor[k] * (1.0 - p.factorThreshold))
              factor = s.lastFactor[k] * (1.0 - p.factorThreshold);
            factorMoved = factorMoved || factor != s.lastFactor[k];
            s.lastFactor[k] = factor;
            const auto scale = static_cast<float>(p.lr * s.lambCoeffFreeze[k] * factor);
            for (size_t i = x.begin; i < x.end; ++i)
              s.params[i] -=
                  scale * (s.expAvg[i] / (std::sqrt(s.expAvgSq[i]) + eps) + x.decay * s.params[i]);
          }
        }
      }
      for (int r = 0; r < n; ++r) {
        CHECK(params[r] == ref[r].params);
        const std::vector<OptimizerStateArray> state = optimizers[r]->stateArrays();
        REQUIRE(state.size() == 3);
        CHECK(state[2].name == "exp_avg_sq_fresh");
        CHECK(std::vector<float>(state[0].data, state[0].data + kCount) == ref[r].expAvg);
        CHECK(std::vector<float>(state[1].data, state[1].data + kCount) == ref[r].expAvgSq);
        CHECK(std::vector<float>(state[2].data, state[2].data + kCount) == ref[r].expAvgSqFresh);
        const std::vector<double> scalars = optimizers[r]->tensorScalars();
        for (int k = 0; k < 2; ++k) {
          CHECK(scalars[3 * k] == ref[r].lambCoeffFreeze[k]);
          CHECK(scalars[3 * k + 1] == ref[r].lastFactor[k]);
        }
      }
      for (int r = 1; r < n; ++r) CHECK(params[r] == params[0]);  // one model on every rank
    }
    CHECK(clamped);      // the trust ratio's clamp acted
    CHECK(factorMoved);  // the factor left 1
  }
}

TEST_CASE("1-bit LAMB: the per-tensor values go through a checkpoint",
          "[optim][onebit][checkpoint]") {
  const OneBitLambParams p = testParams();
  const std::vector<ParamSpec> specs = table();
  OneBitLamb stepped(p, specs, 0, kCount);
  std::vector<float> params = test::randoms(kCount, 3);
  for (int t = 1; t <= 6; ++t) {
    const std::vector<float> grads = test::randoms(kCount, static_cast<unsigned>(t));
    OptimizerStep s;
    s.lr = p.lr;
    stepped.step(params.data(), grads.data(), s);
  }
  const std::vector<double> saved = stepped.tensorScalars();
  REQUIRE(saved.size() == 2 * OneBitLamb::kScalarsPerTensor);
  CHECK(saved[0] > 0.0);  // a frozen coefficient
  CHECK(saved[2] > 0.0);  // the momentum scales were fixed
  // A fresh optimizer given the arrays, the steps and the values takes the same next step.
  OneBitLamb resumed(p, specs, 0, kCount);
  const auto from = stepped.stateArrays(), to = resumed.stateArrays();
  for (size_t a = 0; a < from.size(); ++a)
    std::copy(from[a].data, from[a].data + kCount, to[a].data);
  resumed.setSteps(stepped.steps());
  resumed.setTensorScalars(saved);
  std::vector<float> again = params;
  const std::vector<float> grads = test::randoms(kCount, 77);
  OptimizerStep s;
  s.lr = p.lr;
  stepped.step(params.data(), grads.data(), s);
  resumed.step(again.data(), grads.data(), s);
  CHECK(again == params);
  CHECK_THROWS_AS(resumed.setTensorScalars({1.0}), Error);
  CHECK(std::string(resumed.name()) == "OneBitLamb");
}
