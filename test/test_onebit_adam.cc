// 1-bit Adam (runtime/optim/onebit_adam.h) on 1, 2 and 4 ranks (threads over shared memory)
// against a plain reference of DeepSpeed's update rules on the same gradients, across the freeze
// boundary: Adam without bias correction on the averaged gradient for freeze_step steps, then the
// frozen variance and the momentum of each rank's own gradient averaged by the compressed
// all-reduce (test/onebit_reference.h), weight decay added to the update where a tensor decays.
// Bit for bit: the same float operations in the same order.
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "runtime/optim/onebit_adam.h"
#include "test/gpt_parallel_harness.h"
#include "test/float_arrays.h"
#include "test/onebit_reference.h"
#include "test/rank_threads.h"

using namespace ds;
using namespace ds::runtime;

namespace {

std::vector<ParamSpec> table() {  // a decaying weight and a bias, 300 elements in all
  ParamSpec w{"w", {20, 10}, true, 0, 200};
  ParamSpec b{"b", {100}, false, 200, 100};
  return {w, b};
}


}  // namespace

TEST_CASE(
    "1-bit Adam: Adam until freeze_step, then the compressed momentum of each rank's "
    "gradients, as DeepSpeed's rules",
    "[optim][onebit]") {
  OneBitAdamParams p;
  p.lr = 0.01;
  p.beta1 = 0.9;
  p.beta2 = 0.99;
  p.eps = 1e-8;
  p.weightDecay = 0.1;
  p.freezeStep = 3;
  const std::vector<ParamSpec> specs = table();
  constexpr size_t kCount = 300;
  constexpr int kSteps = 7;
  for (int n : {1, 2, 4}) {
    INFO(n << " ranks");
    auto group = test::shmGroup(n);
    std::vector<std::unique_ptr<OneBitAdam>> optimizers;
    for (int r = 0; r < n; ++r)
      optimizers.push_back(std::make_unique<OneBitAdam>(p, specs, 0, kCount));
    std::vector<std::vector<float>> params(n, test::randoms(kCount, 99));
    // The reference: every rank's state, stepped together.
    std::vector<std::vector<float>> wantParams = params, m(n, std::vector<float>(kCount, 0.0f)),
                                    v(n, std::vector<float>(kCount, 0.0f));
    std::vector<test::OneBitErrors> errors(n);
    for (auto& e : errors) e.reset(kCount, n);
    for (int step = 1; step <= kSteps; ++step) {
      INFO("step " << step);
      const bool compressed = step > p.freezeStep;
      const test::StepGradients drawn = test::stepGradients(n, step, kCount);
      const std::vector<std::vector<float>>& local = drawn.local;
      const std::vector<float>& average = drawn.average;
      for (int r = 0; r < n; ++r) CHECK(optimizers[r]->takesLocalGradients() == compressed);
      test::onThreads(n, [&](int r) {
        OptimizerStep s;
        s.lr = p.lr;
        s.dataGroup = &group[r];
        optimizers[r]->step(params[r].data(), (compressed ? local[r] : average).data(), s);
      });
      const float b1 = 0.9f, b2 = 0.99f, lr = 0.01f, eps = 1e-8f;
      for (int r = 0; r < n; ++r) {
        const std::vector<float>& g = compressed ? local[r] : average;
        for (size_t i = 0; i < kCount; ++i) m[r][i] = b1 * m[r][i] + (1.0f - b1) * g[i];
        if (!compressed)
          for (size_t i = 0; i < kCount; ++i) v[r][i] = b2 * v[r][i] + (1.0f - b2) * g[i] * g[i];
      }
      if (compressed && n > 1) test::referenceOneBitAllReduce(m, errors);
      for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < kCount; ++i) {
          const float wd = i < 200 ? 0.1f : 0.0f;
          const float update = m[r][i] / (std::sqrt(v[r][i]) + eps) + wd * wantParams[r][i];
          wantParams[r][i] -= lr * update;
        }
      for (int r = 0; r < n; ++r) {
        CHECK(params[r] == wantParams[r]);
        const std::vector<OptimizerStateArray> state = optimizers[r]->stateArrays();
        CHECK(std::vector<float>(state[0].data, state[0].data + kCount) == m[r]);
        CHECK(std::vector<float>(state[1].data, state[1].data + kCount) == v[r]);
      }
      for (int r = 1; r < n; ++r) CHECK(params[r] == params[0]);  // one model on every rank
    }
    CHECK(optimizers[0]->steps() == kSteps);
    CHECK(std::string(optimizers[0]->name()) == "OneBitAdam");
  }
}
