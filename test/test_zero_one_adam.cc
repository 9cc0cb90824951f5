// 0/1 Adam (runtime/optim/zero_one_adam.h) on 1, 2 and 4 ranks (threads over shared memory)
// against a plain reference of DeepSpeed's rules (zoadam.py) on the same gradients, through both
// phases: variance updates at doubling intervals on the averaged gradients, compressed gradients
// between them, then the frozen variance with local steps whose accumulated updates are
// exchanged (1-bit compressed, test/onebit_reference.h) at doubling intervals. Small scalers make
// every interval change happen within 24 steps. Both exchanges tensor by tensor, as DeepSpeed's.
// Bit for bit: the same float operations in the same order.
#include <catch2/catch.hpp>
#include <cmath>
#include <memory>
#include <vector>

#include "runtime/optim/zero_one_adam.h"
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

ZeroOneAdamParams testParams() {
  ZeroOneAdamParams p;
  p.lr = 0.01;
  p.beta1 = 0.9;
  p.beta2 = 0.99;
  p.weightDecay = 0.1;
  p.varFreezeStep = 10;
  p.varUpdateScaler = 2;
  p.localStepScaler = 3;
  p.localStepClipper = 4;
  return p;
}

// DeepSpeed's exchange, tensor by tensor (w: [0, 200), b: [200, 300)): every rank's x at once,
// errors[tensor][rank].
void referencePerTensor(std::vector<std::vector<float>>& x,
                        std::vector<std::vector<test::OneBitErrors>>& errors) {
  const size_t bounds[3] = {0, 200, 300};
  for (size_t t = 0; t < 2; ++t) {
    std::vector<std::vector<float>> pieces;
    for (const auto& rank : x)
      pieces.emplace_back(rank.begin() + static_cast<std::ptrdiff_t>(bounds[t]),
                          rank.begin() + static_cast<std::ptrdiff_t>(bounds[t + 1]));
    test::referenceOneBitAllReduce(pieces, errors[t]);
    for (size_t r = 0; r < x.size(); ++r)
      std::copy(pieces[r].begin(), pieces[r].end(),
                x[r].begin() + static_cast<std::ptrdiff_t>(bounds[t]));
  }
}

// Per tensor, every rank's error feedback, zeroed.
std::vector<std::vector<test::OneBitErrors>> freshErrors(int n) {
  std::vector<std::vector<test::OneBitErrors>> errors(2, std::vector<test::OneBitErrors>(n));
  for (size_t t = 0; t < 2; ++t)
    for (auto& e : errors[t]) e.reset(t == 0 ? 200 : 100, n);
  return errors;
}

// This project's bound on a compressed gradient (zero_one_adam.h): each element within
// factor x (sqrt(v) + eps).
// Returns how many elements it clamped.
int bound(std::vector<float>& x, const std::vector<float>& expAvgSq, float factor) {
  int clamped = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const float limit = factor * (std::sqrt(expAvgSq[i]) + 1e-8f);
    clamped += std::fabs(x[i]) > limit;
    x[i] = std::clamp(x[i], -limit, limit);
  }
  return clamped;
}

// One rank's state in the reference, DeepSpeed's names.
struct ReferenceRank {
  std::vector<float> params, expAvg, expAvgSq, momentumAccumulator;
  double lrs = 0;
};

// DeepSpeed's per-tensor counters (state['var_interval'], ...), advanced after step t.
struct ReferenceSchedule {
  int64_t varInterval = 1, varCounter = 0, localInterval = 1, localCounter = 0;
};

}  // namespace

TEST_CASE(
    "0/1 Adam: variance at doubling intervals, then local steps synchronised at doubling "
    "intervals, as DeepSpeed's rules",
    "[optim][onebit]") {
  const ZeroOneAdamParams p = testParams();
  const std::vector<ParamSpec> specs = table();
  constexpr int kSteps = 24;
  const float b1 = 0.9f, b2 = 0.99f, lr = 0.01f, eps = 1e-8f;
  for (int n : {1, 2, 4}) {
    INFO(n << " ranks");
    auto group = test::shmGroup(n);
    std::vector<std::unique_ptr<ZeroOneAdam>> optimizers;
    for (int r = 0; r < n; ++r)
      optimizers.push_back(std::make_unique<ZeroOneAdam>(p, specs, 0, kCount));
    std::vector<std::vector<float>> params(n, test::randoms(kCount, 99));
    std::vector<ReferenceRank> ref(n);
    for (ReferenceRank& rank : ref) {
      rank.params = params[0];
      rank.expAvg = rank.expAvgSq = rank.momentumAccumulator = std::vector<float>(kCount, 0.0f);
    }
    auto errors = freshErrors(n);
    ReferenceSchedule sched;
    int varSteps = 0, compressedGradSteps = 0, syncs = 0, gradsClamped = 0;
    for (int t = 1; t <= kSteps; ++t) {
      INFO("step " << t);
      const bool frozen = t > p.varFreezeStep;
      const bool varStep = !frozen && t % sched.varInterval == 0;
      const test::StepGradients drawn = test::stepGradients(n, t, kCount);
      const std::vector<std::vector<float>>& local = drawn.local;
      const std::vector<float>& average = drawn.average;
      for (int r = 0; r < n; ++r) REQUIRE(optimizers[r]->takesLocalGradients() == !varStep);
      test::onThreads(n, [&](int r) {
        OptimizerStep s;
        s.lr = p.lr;
        s.dataGroup = &group[r];
        optimizers[r]->step(params[r].data(), (varStep ? average : local[r]).data(), s);
      });

      // The reference, every rank at once.
      std::vector<std::vector<float>> grads(n, average);
      if (!frozen && !varStep) {
        grads = local;
        if (n > 1) {
          referencePerTensor(grads, errors);
          for (int r = 0; r < n; ++r) gradsClamped += bound(grads[r], ref[r].expAvgSq, 1.0f);
        } else {
          grads[0] = average;
        }
        ++compressedGradSteps;
      }
      for (int r = 0; r < n; ++r) {
        ReferenceRank& s = ref[r];
        const std::vector<float>& g = frozen ? local[r] : grads[r];
        for (size_t i = 0; i < kCount; ++i) {
          if (varStep) s.expAvgSq[i] = b2 * s.expAvgSq[i] + (1.0f - b2) * g[i] * g[i];
          s.expAvg[i] = b1 * s.expAvg[i] + (1.0f - b1) * g[i];
        }
        if (frozen) s.lrs += p.lr;
        for (size_t i = 0; i < kCount; ++i) {
          const float wd = i < 200 ? 0.1f : 0.0f;
          const float update = s.expAvg[i] / (std::sqrt(s.expAvgSq[i]) + eps) + wd * s.params[i];
          s.params[i] += -lr * update;
          if (frozen) s.momentumAccumulator[i] += -lr * update;
        }
      }
      varSteps += varStep;
      if (frozen && t % sched.localInterval == 0) {
        ++syncs;
        std::vector<std::vector<float>> u(n);
        for (int r = 0; r < n; ++r) {
          ReferenceRank& s = ref[r];
          for (size_t i = 0; i < kCount; ++i) {
            s.params[i] -= s.momentumAccumulator[i];
            s.momentumAccumulator[i] *= std::sqrt(s.expAvgSq[i]) + eps;
          }
          u[r] = s.momentumAccumulator;
        }
        if (n > 1) referencePerTensor(u, errors);
        for (int r = 0; r < n; ++r) {
          ReferenceRank& s = ref[r];
          const auto perLr = static_cast<float>(1.0 / s.lrs);
          for (size_t i = 0; i < kCount; ++i) {
            // DeepSpeed's -u / lrs, less the weight decay it carries (see zero_one_adam.h).
            const float wd = i < 200 ? 0.1f : 0.0f, denom = std::sqrt(s.expAvgSq[i]) + eps;
            s.expAvg[i] = -u[r][i] * perLr - wd * s.params[i] * denom;
            s.params[i] += u[r][i] / denom;
          }
          s.momentumAccumulator.assign(kCount, 0.0f);
          s.lrs = 0;
        }
      }
      if (!frozen) {
        if (varStep && ++sched.varCounter == p.varUpdateScaler) {
          sched.varCounter = 0;
          sched.varInterval *= 2;
        }
      } else if (++sched.localCounter == p.localStepScaler) {
        sched.localCounter = 0;
        sched.localInterval = std::min<int64_t>(p.localStepClipper, 2 * sched.localInterval);
      }
      if (t == p.varFreezeStep) errors = freshErrors(n);  // the errors now carry local updates

      for (int r = 0; r < n; ++r) {
        CHECK(params[r] == ref[r].params);
        const std::vector<OptimizerStateArray> state = optimizers[r]->stateArrays();
        CHECK(std::vector<float>(state[0].data, state[0].data + kCount) == ref[r].expAvg);
        CHECK(std::vector<float>(state[1].data, state[1].data + kCount) == ref[r].expAvgSq);
      }
      const ZeroOneAdam::Schedule& got = optimizers[0]->schedule();
      CHECK(got.varInterval == sched.varInterval);
      CHECK(got.localInterval == sched.localInterval);
    }
    // The schedule went through every change: variance intervals 1, 2, 4 (updates at 1, 2, 4, 6,
    // 8, compressed gradients at 3, 5, 7, 9, 10), then local intervals 1, 2, 4 (syncs at 11-13,
    // 14, 16, 20, 24).
    // The bound took effect (the random gradients' elements differ in size).
    if (n > 1) CHECK(gradsClamped > 0);
    CHECK(varSteps == 5);
    CHECK(compressedGradSteps == 5);
    CHECK(syncs == 7);
    CHECK(sched.localInterval == 4);
    // One model on every rank right after a sync (step 24 was one), up to the rounding of taking
    // each rank's own local updates back out.
    for (int r = 1; r < n; ++r)
      for (size_t i = 0; i < kCount; ++i) CHECK(params[r][i] == Approx(params[0][i]).margin(1e-6));
  }
}

TEST_CASE("0/1 Adam: the schedules are functions of the step count, so a checkpoint resumes them",
          "[optim][onebit][checkpoint]") {
  const ZeroOneAdamParams p = testParams();
  const std::vector<ParamSpec> specs = table();
  ZeroOneAdam stepped(p, specs, 0, kCount);
  std::vector<float> params = test::randoms(kCount, 3);
  for (int t = 1; t <= 19; ++t) {
    const std::vector<float> grads = test::randoms(kCount, static_cast<unsigned>(t));
    OptimizerStep s;
    s.lr = p.lr;
    stepped.step(params.data(), grads.data(), s);
    ZeroOneAdam resumed(p, specs, 0, kCount);
    resumed.setSteps(t);
    INFO("after step " << t);
    CHECK(resumed.takesLocalGradients() == stepped.takesLocalGradients());
    CHECK(resumed.schedule().varInterval == stepped.schedule().varInterval);
    CHECK(resumed.schedule().varCounter == stepped.schedule().varCounter);
    CHECK(resumed.schedule().localInterval == stepped.schedule().localInterval);
    CHECK(resumed.schedule().localCounter == stepped.schedule().localCounter);
  }
  CHECK(std::string(stepped.name()) == "ZeroOneAdam");
  // The accumulator and the error feedback are counted beside the moments.
  CHECK(stepped.stateBytes() >= 3 * kCount * sizeof(float));
}
