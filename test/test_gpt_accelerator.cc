// The model, the sliced linears and Adam compute through the accelerator they are given (issue
// 47: nothing in the engine or the model calls a backend directly). A recording accelerator wraps
// the CPU backend and counts its GEMMs, each transformer kernel of its table and its Adam steps:
// a Gpt built on it must route every product and kernel there and give the default-built Gpt's
// losses and gradients to the bit.
#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/accelerator.h"
#include "kernels/cpu/cpu_accelerator.h"
#include "kernels/cpu/matmul.h"
#include "runtime/model/flat_parameters.h"
#include "runtime/model/gpt.h"
#include "runtime/optim/adam.h"
#include "runtime/parallel/parallel_linear.h"
#include "test/delegating_accelerator.h"
#include "test/small_gpt.h"

using namespace ds;
using namespace ds::kernels;
using ds::runtime::Batch;
using ds::runtime::FlatParameters;
using ds::runtime::Gpt;
using ds::runtime::GptConfig;

namespace {

// One transformer kernel, counted: calls the CPU backend's kernel of the same slot.
template <auto Member, class F>
struct Counted;
template <auto Member, class R, class... A>
struct Counted<Member, R (*)(A...)> {
  static inline std::atomic<long> calls{0};
  static R call(A... a) {
    calls.fetch_add(1, std::memory_order_relaxed);
    return (cpuAccelerator().transformerKernels().*Member)(a...);
  }
};

#define DS_COUNTED_KERNELS(X)                                                              \
  X(layerNormForward)                                                                      \
  X(layerNormBackward) X(rmsNormForward) X(rmsNormBackward) X(unitForward) X(unitBackward) \
      X(gatedForward) X(gatedBackward) X(scaleNormForward) X(scaleNormBackward)            \
          X(causalSoftmaxForward) X(softmaxBackward) X(attentionTileSoftmax)               \
              X(attentionRowsFinish) X(attentionTileProbs) X(attentionTileScoreGrad)       \
                  X(rowDots) X(rotary) X(crossEntropy) X(embeddingForward)                 \
                  X(embeddingBackward) X(addBias) X(biasGradient) X(add) X(dropout)        \
                      X(normalFromDraws) X(normalFromPhilox)

#define DS_COUNTER(name) \
  Counted<&TransformerKernels::name, decltype(TransformerKernels::name)>::calls
#define DS_CALLS(name) DS_COUNTER(name).load()

TransformerKernels countedTable() {
  TransformerKernels t{};
#define DS_WRAP(name) \
  t.name = &Counted<&TransformerKernels::name, decltype(TransformerKernels::name)>::call;
  DS_COUNTED_KERNELS(DS_WRAP)
#undef DS_WRAP
  return t;
}

long allKernelCalls() {
  long n = 0;
#define DS_ADD(name) n += DS_COUNTER(name).load();
  DS_COUNTED_KERNELS(DS_ADD)
#undef DS_ADD
  return n;
}

void resetKernelCalls() {
#define DS_RESET(name) DS_COUNTER(name) = 0;
  DS_COUNTED_KERNELS(DS_RESET)
#undef DS_RESET
}

// The CPU backend with every GEMM, kernel and Adam step counted.
class RecordingAccelerator final : public ds::test::DelegatingAccelerator {
 public:
  RecordingAccelerator() : DelegatingAccelerator(cpuAccelerator()), table_(countedTable()) {
    resetKernelCalls();
  }
  std::atomic<long> gemms{0}, adamSteps{0}, attentionForwards{0}, attentionBackwards{0};

  std::string deviceName() const override { return "recording " + target().deviceName(); }
  void gemm(size_t m, size_t n, size_t k, float alpha, const GemmInput& a, const GemmInput& b,
            float beta, const GemmOutput& c, Stream s) override {
    gemms.fetch_add(1, std::memory_order_relaxed);
    target().gemm(m, n, k, alpha, a, b, beta, c, s);
  }
  const TransformerKernels& transformerKernels() override { return table_; }
  void attentionForward(const AttentionShape& s, const float* qkv, float* ctx, float* stats,
                        const AttentionDropout* dropout) override {
    attentionForwards.fetch_add(1, std::memory_order_relaxed);
    target().attentionForward(s, qkv, ctx, stats, dropout);
  }
  void attentionBackward(const AttentionShape& s, const float* qkv, const float* ctx,
                         const float* stats, const float* dCtx, float* dqkv,
                         const AttentionDropout* dropout) override {
    attentionBackwards.fetch_add(1, std::memory_order_relaxed);
    target().attentionBackward(s, qkv, ctx, stats, dCtx, dqkv, dropout);
  }
  void adamStep(float* params, const float* grads, float* m, float* v, size_t count,
                const AdamStepConstants& constants, const HalfCopy& copy, Stream s) override {
    adamSteps.fetch_add(1, std::memory_order_relaxed);
    target().adamStep(params, grads, m, v, count, constants, copy, s);
  }

 private:
  TransformerKernels table_;
};

using ds::test::randomBatch;
using ds::test::smallConfig;

}  // namespace

TEST_CASE("accelerator: gemmF32 is kernels::matmul's call on the CPU backend, bit for bit",
          "[accelerator][gpt]") {
  // Strided operands, both transposes, beta 0 and 1.
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  const size_t m = 5, n = 7, k = 3, ld = 9;
  std::vector<float> a(ld * ld), b(ld * ld), c0(m * ld), c1;
  for (float& x : a) x = normal(rng);
  for (float& x : b) x = normal(rng);
  for (float& x : c0) x = normal(rng);
  RecordingAccelerator rec;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (float beta : {0.0f, 1.0f}) {
        std::vector<float> want = c0, got = c0;
        matmul(ta, tb, m, n, k, 0.5f, a.data(), ld, b.data(), ld, beta, want.data(), ld);
        ds::kernels::gemmF32(rec, ta, tb, m, n, k, 0.5f, a.data(), ld, b.data(), ld, beta,
                             got.data(), ld);
        CHECK(got == want);
      }
  CHECK(rec.gemms == 8);
}

TEST_CASE(
    "GPT: a Gpt on a recording accelerator routes every product and kernel through it and "
    "gives the default Gpt's losses and gradients bit for bit",
    "[gpt][accelerator]") {
  struct Case {
    const char* name;
    bool dropout, rotary, tied;
  };
  for (const Case& k :
       {Case{"plain", false, false, false}, Case{"rotary, dropout, tied", true, true, true}}) {
    SECTION(k.name) {
      GptConfig c = smallConfig();
      if (k.rotary) c.posEmb = ds::runtime::PositionEmbedding::Rotary;
      if (k.dropout) c.attentionDropout = c.hiddenDropout = 0.1;
      c.weightTying = k.tied;
      RecordingAccelerator rec;
      Gpt plain(c);
      Gpt routed(c, {}, rec);
      CHECK(&plain.accelerator() == &accelerator(DeviceKind::Cpu));
      CHECK(&routed.accelerator() == &rec);

      std::vector<float> params(plain.parameterCount()), routedParams(routed.parameterCount());
      plain.initParameters(params.data(), 3);
      routed.initParameters(routedParams.data(), 3);
      CHECK(routedParams == params);
      // Initialisation writes host memory with the CPU's kernels, whatever the device.
      CHECK(DS_CALLS(normalFromPhilox) == 0);

      const size_t B = 4, T = 12, L = 2;
      const Batch batch = randomBatch(c, B, T, 5);
      FlatParameters a(plain, params.data()), b(routed, params.data());
      rec.gemms = 0;
      const float want = plain.forwardBackward(batch, a, 1.0f);
      const float got = routed.forwardBackward(batch, b, 1.0f);
      CHECK(got == want);
      CHECK(b.gradients() == a.gradients());
      // Every product of a training step, counted: per block 4 projections forward and 8
      // backward, the head's logits forward and their 2 gradient products (48 rows, one chunk);
      // attention is one accelerator call each way per block (its tiles' products are the
      // backend's own).
      CHECK(rec.gemms == static_cast<long>(L * 12 + 3));
      CHECK(rec.attentionForwards == static_cast<long>(L));
      CHECK(rec.attentionBackwards == static_cast<long>(L));
      for (long calls :
           {DS_CALLS(layerNormForward), DS_CALLS(layerNormBackward), DS_CALLS(unitForward), DS_CALLS(unitBackward),
            DS_CALLS(crossEntropy), DS_CALLS(embeddingForward), DS_CALLS(embeddingBackward),
            DS_CALLS(addBias), DS_CALLS(biasGradient), DS_CALLS(add)})
        CHECK(calls > 0);
      if (k.rotary) CHECK(DS_CALLS(rotary) > 0);
      if (k.dropout) CHECK(DS_CALLS(dropout) > 0);

      const long before = allKernelCalls();
      CHECK(routed.evaluate(batch, b) == plain.evaluate(batch, a));
      const std::vector<int32_t> prompt(batch.inputIds.begin(), batch.inputIds.begin() + 5);
      CHECK(routed.nextTokenLogits(prompt, b) == plain.nextTokenLogits(prompt, a));
      CHECK(allKernelCalls() > before);
    }
  }
}

TEST_CASE("GPT: the sliced linears and Adam run on the accelerator they are given",
          "[gpt][accelerator]") {
  RecordingAccelerator rec;
  const ds::runtime::LinearShape s{3, 4, 5};
  std::vector<float> x(s.rows * s.in, 0.5f), w(s.out * s.in, 0.25f), y(s.rows * s.out),
      dy(s.rows * s.out, 1.0f), dw(w.size()), db(s.out), dx(x.size());
  ds::runtime::columnParallelForward(rec, s, x.data(), w.data(), nullptr, y.data());
  ds::runtime::rowParallelBackward(rec, s, x.data(), w.data(), dy.data(), dw.data(), db.data(),
                                   dx.data());
  CHECK(rec.gemms == 3);
  CHECK(y[0] == 0.5f);  // 4 x 0.5 x 0.25

  ds::runtime::AdamParams ap;
  ap.lr = 0.01;
  ap.weightDecay = 0.1;
  std::vector<ds::runtime::ParamSpec> specs(2);
  specs[0] = {"w", {6}, true, 0, 6};
  specs[1] = {"b", {5}, false, 6, 5};
  ds::runtime::Adam plain(ap, specs, 0, 11), routed(ap, specs, 0, 11, rec);
  std::vector<float> p(11), q, g(11);
  for (size_t i = 0; i < p.size(); ++i) {
    p[i] = std::cos(0.7f * i);
    g[i] = std::sin(1.3f * i);
  }
  q = p;
  ds::runtime::OptimizerStep step;
  step.lr = 0.01;
  for (int i = 0; i < 3; ++i) {
    plain.step(p.data(), g.data(), step);
    routed.step(q.data(), g.data(), step);
  }
  CHECK(q == p);
  CHECK(rec.adamSteps == 6);  // two decay groups a step
}
