// The accelerator interface on the CPU: choosing the device (names, DS_ACCELERATOR, a CUDA that
// is missing says why), the CPU backend giving bit for bit what the direct kernel calls give, and
// the CUDA kernels' per-element maths (kernels/cuda/kernel_math.h, compiled here as plain C++)
// giving bit for bit what the CPU kernels compute. The same functions run on the GPU, where
// test/cuda/test_cuda_kernels.cc checks the kernels around them.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "kernels/accelerator.h"
#include "kernels/cpu/adam_kernel.h"
#include "kernels/cpu/cpu_adam.h"
#include "kernels/cpu/half_convert.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/transformer_kernels.h"
#include "kernels/cuda/kernel_math.h"
#include "test/float_arrays.h"
#include "test/scoped_env.h"

namespace math = ds::kernels::math;
using ds::DType;
using ds::kernels::Accelerator;
using ds::kernels::DeviceKind;
using ds::kernels::GemmInput;
using ds::kernels::GemmOutput;
using ds::kernels::KernelIsa;
using ds::kernels::Transpose;
using ds::kernels::Unit;
using ds::test::bitwiseEqual;
using ds::test::randoms;
using ds::test::ScopedEnv;

namespace {

const Unit kUnits[] = {Unit::Gelu,     Unit::Relu,     Unit::Silu, Unit::Sigmoid,
                       Unit::Identity, Unit::Softsign, Unit::Mish};

// The CPU kernels' row sums and maxima (transformer_kernels_impl.h): 16 lanes combined in a fixed
// tree. Rebuilt here so that a row kernel's per-element step can be checked bit for bit.
template <class Term>
float laneSum(size_t n, Term term) {
  float acc[16] = {};
  size_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (size_t j = 0; j < 16; ++j) acc[j] += term(i + j);
  for (size_t j = 0; i + j < n; ++j) acc[j] += term(i + j);
  float s8[8], s4[4];
  for (int j = 0; j < 8; ++j) s8[j] = acc[j] + acc[j + 8];
  for (int j = 0; j < 4; ++j) s4[j] = s8[j] + s8[j + 4];
  return (s4[0] + s4[2]) + (s4[1] + s4[3]);
}

float laneMax(const float* x, size_t n) {
  float acc[16];
  for (float& a : acc) a = -INFINITY;
  size_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (size_t j = 0; j < 16; ++j) acc[j] = x[i + j] > acc[j] ? x[i + j] : acc[j];
  for (size_t j = 0; i + j < n; ++j) acc[j] = x[i + j] > acc[j] ? x[i + j] : acc[j];
  float m = acc[0];
  for (size_t j = 1; j < 16; ++j) m = acc[j] > m ? acc[j] : m;
  return m;
}

// Activation inputs: the usual range, both exp clamps (-80, 80, -40, 20), zero and signed zero.
std::vector<float> activationInputs() {
  std::vector<float> x = randoms(3001, 11, 4.0f);
  for (float v : {0.0f, -0.0f, 1e-30f, -1e-30f, 20.0f, 20.5f, -40.0f, -41.0f, 80.0f, 85.0f, -80.0f,
                  -90.0f, 1e4f, -1e4f})
    x.push_back(v);
  return x;
}

bool sameBits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

const ds::kernels::TransformerKernels& scalarKernels() {
  return ds::kernels::transformerKernels(KernelIsa::Scalar);
}

}  // namespace

TEST_CASE("accelerator: device names parse, and anything else names the value and the choices") {
  CHECK(ds::kernels::parseDevice("cpu") == DeviceKind::Cpu);
  CHECK(ds::kernels::parseDevice("cuda") == DeviceKind::Cuda);
  CHECK(std::string(ds::kernels::deviceKindName(DeviceKind::Cuda)) == "cuda");
  CHECK_THROWS_WITH(ds::kernels::parseDevice("gpu", "--device"),
                    "--device: expected cpu or cuda, got \"gpu\"");
  CHECK_THROWS_AS(ds::kernels::parseDevice("CUDA"), ds::Error);
  CHECK_THROWS_AS(ds::kernels::parseDevice(""), ds::Error);
}

TEST_CASE("accelerator: an explicit choice wins, else DS_ACCELERATOR, else the CPU") {
  {
    ScopedEnv env("DS_ACCELERATOR", std::nullopt);
    CHECK(ds::kernels::selectDevice() == DeviceKind::Cpu);
    CHECK(ds::kernels::selectDevice("cuda") == DeviceKind::Cuda);
  }
  {
    ScopedEnv env("DS_ACCELERATOR", std::string("cuda"));
    CHECK(ds::kernels::selectDevice() == DeviceKind::Cuda);
    CHECK(ds::kernels::selectDevice("cpu") == DeviceKind::Cpu);
  }
  {
    ScopedEnv env("DS_ACCELERATOR", std::string(""));
    CHECK(ds::kernels::selectDevice() == DeviceKind::Cpu);
  }
  {
    ScopedEnv env("DS_ACCELERATOR", std::string("xpu"));
    CHECK_THROWS_WITH(ds::kernels::selectDevice(),
                      "DS_ACCELERATOR: expected cpu or cuda, got \"xpu\"");
    CHECK(ds::kernels::selectDevice("cpu") == DeviceKind::Cpu);  // not read when not needed
  }
}

TEST_CASE("accelerator: cuda without a GPU (or without CUDA built in) says which") {
  std::string why;
  CHECK(ds::kernels::acceleratorAvailable(DeviceKind::Cpu, &why));
  CHECK(why.empty());
  if (ds::kernels::acceleratorAvailable(DeviceKind::Cuda, &why)) {
    CHECK(ds::kernels::accelerator(DeviceKind::Cuda).kind() == DeviceKind::Cuda);
    return;  // a GPU machine: test/cuda checks that backend
  }
  INFO(why);
  const bool noGpu = why.find("device cuda: no GPU visible: ") == 0;
  const bool notBuilt = why.find("device cuda: this build has no CUDA backend") == 0;
  CHECK((noGpu || notBuilt));
  CHECK_THROWS_WITH(ds::kernels::accelerator(DeviceKind::Cuda), why);
}

TEST_CASE("accelerator: the CPU backend's memory, copies, streams and events") {
  Accelerator& acc = ds::kernels::accelerator(DeviceKind::Cpu);
  CHECK(acc.kind() == DeviceKind::Cpu);
  CHECK(std::string(acc.communicationBackend()) == "gloo");
  CHECK(acc.deviceCount() == 1);
  CHECK_THROWS_AS(acc.setDevice(1), ds::Error);
  CHECK(acc.memoryInfo().totalBytes > 0);

  const std::vector<float> host = randoms(1000, 7);
  ds::kernels::DeviceBuffer device(acc, host.size() * sizeof(float));
  float* pinned = static_cast<float*>(acc.allocatePinned(host.size() * sizeof(float)));
  CHECK(reinterpret_cast<uintptr_t>(device.data()) % 64 == 0);
  CHECK(reinterpret_cast<uintptr_t>(pinned) % 64 == 0);
  const ds::kernels::Stream stream = acc.createStream();
  acc.copy(device.data(), host.data(), device.bytes(), ds::kernels::CopyKind::HostToDevice, stream);
  ds::kernels::DeviceBuffer moved = std::move(device);
  CHECK(device.data() == nullptr);
  const ds::kernels::Event start = acc.createEvent(), end = acc.createEvent();
  acc.recordEvent(start, stream);
  acc.copy(pinned, moved.data(), moved.bytes(), ds::kernels::CopyKind::DeviceToHost, stream);
  acc.recordEvent(end, stream);
  acc.waitEvent(stream, end);
  acc.synchronize(stream);
  CHECK(acc.elapsedMs(start, end) >= 0.0f);
  CHECK(std::memcmp(pinned, host.data(), moved.bytes()) == 0);
  acc.fillZero(moved.data(), moved.bytes(), stream);
  CHECK(moved.data<float>()[999] == 0.0f);
  acc.destroyEvent(start);
  acc.destroyEvent(end);
  acc.destroyStream(stream);
  acc.releasePinned(pinned);
}

TEST_CASE("accelerator: the CPU backend's fp32 GEMM is matmul, bit for bit") {
  Accelerator& acc = ds::kernels::accelerator(DeviceKind::Cpu);
  const size_t m = 37, n = 29, k = 53, pad = 3;
  for (Transpose ta : {Transpose::No, Transpose::Yes})
    for (Transpose tb : {Transpose::No, Transpose::Yes})
      for (float beta : {0.0f, 0.5f}) {
        const size_t lda = (ta == Transpose::Yes ? m : k) + pad;
        const size_t ldb = (tb == Transpose::Yes ? k : n) + pad, ldc = n + pad;
        const auto a = randoms((ta == Transpose::Yes ? k : m) * lda, 1);
        const auto b = randoms((tb == Transpose::Yes ? n : k) * ldb, 2);
        auto viaAcc = randoms(m * ldc, 3), direct = viaAcc;
        acc.gemm(m, n, k, 0.75f, {a.data(), DType::F32, lda, ta}, {b.data(), DType::F32, ldb, tb},
                 beta, {viaAcc.data(), DType::F32, ldc}, {});
        ds::kernels::matmul(ta == Transpose::Yes, tb == Transpose::Yes, m, n, k, 0.75f, a.data(),
                            lda, b.data(), ldb, beta, direct.data(), ldc);
        CHECK(bitwiseEqual(viaAcc, direct));
      }
}

TEST_CASE("accelerator: the CPU backend's bf16 GEMM is matmul on the widened inputs") {
  Accelerator& acc = ds::kernels::accelerator(DeviceKind::Cpu);
  const size_t m = 19, n = 23, k = 41;
  const auto a32 = randoms(k * m, 4), b32 = randoms(k * n, 5);
  std::vector<uint16_t> a(a32.size()), b(b32.size());
  ds::kernels::floatToBf16(a32.data(), a.data(), a.size());
  ds::kernels::floatToBf16(b32.data(), b.data(), b.size());
  std::vector<float> aw(a.size()), bw(b.size());
  ds::kernels::bf16ToFloat(a.data(), aw.data(), a.size());
  ds::kernels::bf16ToFloat(b.data(), bw.data(), b.size());
  // a stored [k, m] (transposed), b stored [k, n].
  std::vector<float> c(m * n, 0.0f), expected(m * n, 0.0f);
  acc.gemm(m, n, k, 1.0f, {a.data(), DType::BF16, m, Transpose::Yes}, {b.data(), DType::BF16, n},
           0.0f, {c.data(), DType::F32, n}, {});
  ds::kernels::matmul(true, false, m, n, k, 1.0f, aw.data(), m, bw.data(), n, 0.0f, expected.data(),
                      n);
  CHECK(bitwiseEqual(c, expected));

  // bf16 out with beta: the fp32 product of the widened c, rounded once.
  std::vector<uint16_t> c16(m * n);
  ds::kernels::floatToBf16(expected.data(), c16.data(), c16.size());
  std::vector<float> c16wide(c16.size());
  ds::kernels::bf16ToFloat(c16.data(), c16wide.data(), c16.size());
  acc.gemm(m, n, k, 1.0f, {a.data(), DType::BF16, m, Transpose::Yes}, {b.data(), DType::BF16, n},
           1.0f, {c16.data(), DType::BF16, n}, {});
  ds::kernels::matmul(true, false, m, n, k, 1.0f, aw.data(), m, bw.data(), n, 1.0f, c16wide.data(),
                      n);
  std::vector<uint16_t> rounded(c16.size());
  ds::kernels::floatToBf16(c16wide.data(), rounded.data(), rounded.size());
  CHECK(c16 == rounded);

  CHECK_THROWS_WITH(acc.gemm(m, n, k, 1.0f, {a.data(), DType::BF16, m}, {b32.data(), DType::F32, n},
                             0.0f, {c.data(), DType::F32, n}, {}),
                    "gemm: inputs must be both fp32 or both bf16, got bf16 and fp32");
  CHECK_THROWS_AS(acc.gemm(m, n, k, 1.0f, {a32.data(), DType::F32, m}, {b32.data(), DType::F32, n},
                           0.0f, {c16.data(), DType::BF16, n}, {}),
                  ds::Error);
}

TEST_CASE("accelerator: the CPU backend's transformer kernels and Adam are today's, bit for bit") {
  Accelerator& acc = ds::kernels::accelerator(DeviceKind::Cpu);
  CHECK(&acc.transformerKernels() == &ds::kernels::transformerKernels());

  const size_t count = 1037;
  auto p1 = randoms(count, 1), m1 = randoms(count, 2, 0.1f), v1 = randoms(count, 3, 0.01f);
  for (float& v : v1) v = std::fabs(v);
  auto p2 = p1, m2 = m1, v2 = v1;
  const auto g = randoms(count, 4);
  for (bool adamw : {false, true}) {
    const auto c = ds::kernels::adamStepConstants(1e-3, 0.9, 0.999, 1e-8, 0.01, adamw, 3);
    std::vector<uint16_t> half1(count), half2(count);
    acc.adamStep(p1.data(), g.data(), m1.data(), v1.data(), count, c,
                 {half1.data(), ds::kernels::HalfFormat::Bf16}, {});
    ds::kernels::cpuAdamStep(p2.data(), g.data(), m2.data(), v2.data(), count, c,
                             {half2.data(), ds::kernels::HalfFormat::Bf16});
    CHECK(bitwiseEqual(p1, p2));
    CHECK(bitwiseEqual(m1, m2));
    CHECK(bitwiseEqual(v1, v2));
    CHECK(half1 == half2);
  }
}

TEST_CASE("accelerator: the CPU backend's unscale and overflow check") {
  Accelerator& acc = ds::kernels::accelerator(DeviceKind::Cpu);
  const auto g = randoms(517, 9, 100.0f);
  std::vector<uint16_t> bf(g.size()), fp(g.size());
  ds::kernels::floatToBf16(g.data(), bf.data(), g.size());
  ds::kernels::floatToFp16(g.data(), fp.data(), g.size());
  const float unscale = 1.0f / 1024.0f;
  for (DType type : {DType::F32, DType::BF16, DType::F16}) {
    INFO(ds::dtypeName(type));
    const void* in = type == DType::F32    ? static_cast<const void*>(g.data())
                     : type == DType::BF16 ? static_cast<const void*>(bf.data())
                                           : static_cast<const void*>(fp.data());
    std::vector<float> out(g.size()), expected(g.size());
    for (size_t i = 0; i < g.size(); ++i) {
      const float v = type == DType::F32    ? g[i]
                      : type == DType::BF16 ? ds::kernels::bf16ToFloat(bf[i])
                                            : ds::kernels::fp16ToFloat(fp[i]);
      expected[i] = v * unscale;
    }
    uint32_t overflow = 0;
    acc.unscaleGradients(in, type, out.data(), g.size(), unscale, &overflow, {});
    CHECK(overflow == 0);
    CHECK(bitwiseEqual(out, expected));
  }
  // A non-finite gradient of each type sets the flag, which stays set.
  for (float bad : {INFINITY, -INFINITY, NAN}) {
    auto g2 = g;
    g2[300] = bad;
    std::vector<uint16_t> bf2(g2.size()), fp2(g2.size());
    ds::kernels::floatToBf16(g2.data(), bf2.data(), g2.size());
    ds::kernels::floatToFp16(g2.data(), fp2.data(), g2.size());
    std::vector<float> out(g2.size());
    uint32_t overflow = 0;
    acc.unscaleGradients(g2.data(), DType::F32, out.data(), g2.size(), unscale, &overflow, {});
    CHECK(overflow == 1);
    acc.unscaleGradients(g.data(), DType::F32, out.data(), g.size(), unscale, &overflow, {});
    CHECK(overflow == 1);
    overflow = 0;
    acc.unscaleGradients(bf2.data(), DType::BF16, out.data(), g2.size(), unscale, &overflow, {});
    CHECK(overflow == 1);
    overflow = 0;
    acc.unscaleGradients(fp2.data(), DType::F16, out.data(), g2.size(), unscale, &overflow, {});
    CHECK(overflow == 1);
  }
  // 70000 is finite in fp32 and bf16 but overflows fp16: the fp16 gradient is +inf.
  const uint16_t big = ds::kernels::floatToFp16(70000.0f);
  float out = 0.0f;
  uint32_t overflow = 0;
  acc.unscaleGradients(&big, DType::F16, &out, 1, unscale, &overflow, {});
  CHECK(overflow == 1);
}

TEST_CASE("kernel math: the activations and their derivatives are the CPU kernels', bit for bit") {
  const auto x = activationInputs();
  const auto ones = std::vector<float>(x.size(), 1.0f);
  for (Unit u : kUnits) {
    INFO("unit " << static_cast<int>(u));
    std::vector<float> f(x.size()), df(x.size());
    scalarKernels().unitForward(u, f.data(), x.data(), x.size());
    scalarKernels().unitBackward(u, df.data(), ones.data(), x.data(), x.size());
    size_t differ = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      differ += !sameBits(math::unitValue(u, x[i]), f[i]);
      differ += !sameBits(1.0f * math::unitDerivative(u, x[i]), df[i]);
    }
    CHECK(differ == 0);
  }
  CHECK(sameBits(math::unitValue<Unit::Gelu>(0.5f), math::gelu(0.5f)));
}

TEST_CASE("kernel math: the gated activations (SwiGLU, GeGLU, ...) are the CPU kernels'") {
  const size_t rows = 5, ff = 37;
  const auto in = randoms(rows * 2 * ff, 21, 3.0f), g = randoms(rows * ff, 22);
  for (Unit u : kUnits) {
    INFO("unit " << static_cast<int>(u));
    std::vector<float> out(rows * ff), din(rows * 2 * ff);
    scalarKernels().gatedForward(u, out.data(), in.data(), rows, ff);
    scalarKernels().gatedBackward(u, din.data(), g.data(), in.data(), rows, ff);
    size_t differ = 0;
    for (size_t r = 0; r < rows; ++r)
      for (size_t i = 0; i < ff; ++i) {
        const float x = in[r * 2 * ff + i], gate = in[r * 2 * ff + ff + i], d = g[r * ff + i];
        differ += !sameBits(x * math::unitValue(u, gate), out[r * ff + i]);
        differ += !sameBits(d * math::unitValue(u, gate), din[r * 2 * ff + i]);
        differ += !sameBits(d * x * math::unitDerivative(u, gate), din[r * 2 * ff + ff + i]);
      }
    CHECK(differ == 0);
  }
}

TEST_CASE("kernel math: LayerNorm's per-element steps are the CPU kernel's") {
  const size_t rows = 6, dim = 77;
  const auto x = randoms(rows * dim, 31, 2.0f), w = randoms(dim, 32), b = randoms(dim, 33),
             g = randoms(rows * dim, 34);
  std::vector<float> y(rows * dim), mean(rows), rstd(rows), dx(rows * dim), dw(dim, 0.0f),
      db(dim, 0.0f);
  scalarKernels().layerNormForward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(),
                                   rows, dim, 1e-5f);
  scalarKernels().layerNormBackward(dx.data(), dw.data(), db.data(), g.data(), x.data(),
                                    mean.data(), rstd.data(), w.data(), rows, dim);
  std::vector<float> dwRef(dim, 0.0f);
  size_t differ = 0;
  for (size_t r = 0; r < rows; ++r) {
    const float* xr = &x[r * dim];
    const float* gr = &g[r * dim];
    const float mu = laneSum(dim, [&](size_t i) { return xr[i]; }) / static_cast<float>(dim);
    const float var = laneSum(dim, [&](size_t i) { return (xr[i] - mu) * (xr[i] - mu); }) /
                      static_cast<float>(dim);
    differ += !sameBits(mu, mean[r]) + !sameBits(1.0f / std::sqrt(var + 1e-5f), rstd[r]);
    const float s = rstd[r];
    const float a = laneSum(dim, [&](size_t i) { return gr[i] * w[i]; }) / static_cast<float>(dim);
    const float c = laneSum(dim, [&](size_t i) { return gr[i] * w[i] * ((xr[i] - mu) * s); }) /
                    static_cast<float>(dim);
    for (size_t i = 0; i < dim; ++i) {
      differ += !sameBits(math::layerNormValue(xr[i], mu, s, w[i], b[i]), y[r * dim + i]);
      differ +=
          !sameBits(math::layerNormInputGrad(gr[i], xr[i], w[i], mu, s, a, c), dx[r * dim + i]);
      dwRef[i] += math::layerNormWeightGrad(gr[i], xr[i], mu, s);
    }
  }
  CHECK(differ == 0);
  CHECK(bitwiseEqual(dwRef, dw));
}

TEST_CASE("kernel math: RMSNorm's per-element steps are the CPU kernel's") {
  const size_t rows = 6, dim = 77;
  const float eps = 1e-6f;
  const auto x = randoms(rows * dim, 41, 2.0f), w = randoms(dim, 42), g = randoms(rows * dim, 43);
  std::vector<float> y(rows * dim), norm(rows), dx(rows * dim), dw(dim, 0.0f), dwRef(dim, 0.0f);
  scalarKernels().rmsNormForward(y.data(), norm.data(), x.data(), w.data(), rows, dim, eps);
  scalarKernels().rmsNormBackward(dx.data(), dw.data(), g.data(), x.data(), norm.data(), w.data(),
                                  rows, dim, eps);
  size_t differ = 0;
  for (size_t r = 0; r < rows; ++r) {
    const float* xr = &x[r * dim];
    const float* gr = &g[r * dim];
    const float meanSquare =
        laneSum(dim, [&](size_t i) { return xr[i] * xr[i]; }) / static_cast<float>(dim);
    const float s = math::rmsNormScale(meanSquare, eps);
    differ += !sameBits(s, norm[r]);
    const float gx = laneSum(dim, [&](size_t i) { return gr[i] * w[i] * xr[i]; });
    const float k = s * s * s * gx / static_cast<float>(dim);
    for (size_t i = 0; i < dim; ++i) {
      differ += !sameBits(math::rmsNormValue(xr[i], s, w[i]), y[r * dim + i]);
      differ += !sameBits(math::rmsNormInputGrad(gr[i], xr[i], w[i], s, k), dx[r * dim + i]);
      dwRef[i] += math::rmsNormWeightGrad(gr[i], xr[i], s);
    }
  }
  CHECK(differ == 0);
  CHECK(bitwiseEqual(dwRef, dw));
}

TEST_CASE("kernel math: rotary's pair rotation is the CPU kernel's, both directions") {
  const size_t rows = 6, seq = 4, heads = 3, headDim = 16, rotDim = 12, stride = heads * headDim;
  const size_t half = rotDim / 2;
  const auto x = randoms(rows * stride, 51), cos = randoms(seq * half, 52),
             sin = randoms(seq * half, 53);
  for (bool inverse : {false, true}) {
    auto cpu = x, ref = x;
    scalarKernels().rotary(cpu.data(), rows, seq, heads, headDim, stride, rotDim, cos.data(),
                           sin.data(), inverse);
    for (size_t r = 0; r < rows; ++r)
      for (size_t h = 0; h < heads; ++h)
        for (size_t i = 0; i < half; ++i) {
          float* v = &ref[r * stride + h * headDim];
          math::rotatePair(v[i], v[i + half], cos[(r % seq) * half + i], sin[(r % seq) * half + i],
                           inverse ? -1.0f : 1.0f);
        }
    CHECK(bitwiseEqual(cpu, ref));
  }
}

TEST_CASE("kernel math: cross-entropy's softmax gradient and loss are the CPU kernel's") {
  const size_t rows = 5, vocab = 203;
  const float gradScale = 0.125f;
  const auto logits = randoms(rows * vocab, 61, 3.0f);
  const std::vector<int32_t> targets = {3, -100, 202, 0, 77};
  auto grads = logits;
  const double loss =
      scalarKernels().crossEntropy(grads.data(), targets.data(), rows, vocab, gradScale);
  double lossRef = 0.0;
  size_t differ = 0;
  for (size_t r = 0; r < rows; ++r) {
    const float* z = &logits[r * vocab];
    if (targets[r] < 0) {
      for (size_t j = 0; j < vocab; ++j) differ += grads[r * vocab + j] != 0.0f;
      continue;
    }
    const float m = laneMax(z, vocab);
    std::vector<float> e(vocab);
    for (size_t j = 0; j < vocab; ++j) e[j] = math::expApprox(z[j] - m);
    const float sum = laneSum(vocab, [&](size_t j) { return e[j]; });
    lossRef += std::log(static_cast<double>(sum)) + static_cast<double>(m) - z[targets[r]];
    const float k = gradScale / sum;
    for (size_t j = 0; j < vocab; ++j) {
      float gj = e[j] * k;
      if (j == static_cast<size_t>(targets[r])) gj -= gradScale;
      differ += !sameBits(gj, grads[r * vocab + j]);
    }
  }
  CHECK(differ == 0);
  CHECK(loss == lossRef);
}

TEST_CASE("kernel math: dropout's mask is the CPU kernel's") {
  const size_t n = 1001;
  const auto in = randoms(n, 71);
  std::vector<float> out(n);
  const uint64_t base = 0x1234567890ull, first = 77;
  const uint32_t threshold = static_cast<uint32_t>(0.1 * (1u << 24));
  scalarKernels().dropout(in.data(), out.data(), n, base, first, threshold, 1.0f / 0.9f);
  size_t differ = 0, dropped = 0;
  for (size_t i = 0; i < n; ++i) {
    differ +=
        !sameBits(math::dropoutValue(in[i], base + first + i, threshold, 1.0f / 0.9f), out[i]);
    dropped += out[i] == 0.0f;
  }
  CHECK(differ == 0);
  CHECK(dropped > 50);
  CHECK(dropped < 150);
}

TEST_CASE("kernel math: one Adam/AdamW element is adamUpdate's, bit for bit") {
  const size_t count = 999;
  const auto g = randoms(count, 81);
  for (bool adamw : {false, true})
    for (int64_t step : {1, 2, 1000}) {
      auto p = randoms(count, 82), m = randoms(count, 83, 0.1f), v = randoms(count, 84, 0.01f);
      for (float& x : v) x = std::fabs(x);
      auto pr = p, mr = m, vr = v;
      const auto c = ds::kernels::adamStepConstants(3e-4, 0.9, 0.95, 1e-8, 0.1, adamw, step);
      ds::kernels::adamUpdate(p.data(), g.data(), m.data(), v.data(), count, c);
      for (size_t i = 0; i < count; ++i) math::adamElement(pr[i], g[i], mr[i], vr[i], c);
      CHECK(bitwiseEqual(p, pr));
      CHECK(bitwiseEqual(m, mr));
      CHECK(bitwiseEqual(v, vr));
    }
}

TEST_CASE("kernel math: half conversions are half_convert.h's, every fp16 and bf16 value") {
  size_t differ = 0;
  for (uint32_t bits = 0; bits <= 0xffffu; ++bits) {
    const auto h = static_cast<uint16_t>(bits);
    const float a = math::fp16BitsToFloat(h), b = ds::kernels::fp16ToFloat(h);
    differ += std::isnan(b) ? !std::isnan(a) : !sameBits(a, b);
    const float c = math::bf16BitsToFloat(h), d = ds::kernels::bf16ToFloat(h);
    differ += std::isnan(d) ? !std::isnan(c) : !sameBits(c, d);
  }
  CHECK(differ == 0);
}

TEST_CASE("kernel math: rounding to fp16 and bf16 is half_convert.h's") {
  std::vector<float> values = randoms(20000, 91, 1000.0f);
  const auto small = randoms(20000, 92, 1e-5f);  // fp16's subnormals
  values.insert(values.end(), small.begin(), small.end());
  std::mt19937 rng(93);
  for (int i = 0; i < 100000; ++i) {  // any bit pattern
    const uint32_t bits = rng();
    float f;
    std::memcpy(&f, &bits, sizeof f);
    values.push_back(f);
  }
  // Ties and boundaries: halfway between fp16 neighbours, the overflow edge, the subnormal edges.
  for (float v : {65504.0f,
                  65519.99f,
                  65520.0f,
                  65536.0f,
                  6.103515625e-05f,
                  6.0975552e-05f,
                  5.9604645e-08f,
                  2.9802322e-08f,
                  2.9802326e-08f,
                  8.940697e-08f,
                  1.0009765625f,
                  1.00048828125f,
                  1.00146484375f,
                  0.0f,
                  -0.0f,
                  INFINITY,
                  -INFINITY,
                  NAN,
                  std::numeric_limits<float>::denorm_min(),
                  std::numeric_limits<float>::max()})
    for (float sign : {1.0f, -1.0f}) values.push_back(sign * v);
  size_t differ = 0;
  for (float v : values) {
    const uint16_t h = math::floatToFp16Bits(v), hRef = ds::kernels::floatToFp16(v);
    const uint16_t b = math::floatToBf16Bits(v), bRef = ds::kernels::floatToBf16(v);
    if (std::isnan(v)) {
      differ += !std::isnan(ds::kernels::fp16ToFloat(h)) + !std::isnan(ds::kernels::bf16ToFloat(b));
    } else {
      differ += (h != hRef) + (b != bRef);
    }
  }
  CHECK(differ == 0);
}
