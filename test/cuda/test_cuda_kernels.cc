// Every CUDA kernel of the accelerator against its CPU reference on random inputs (the scalar
// transformer kernels, adamUpdate, GEMMs in double), plus the backend's memory, copies, streams
// and events. A plain program, no test framework, so that scripts/gpu-check builds it on a GPU
// machine with only the CUDA toolkit: one line per check, exit 0 when all pass, 1 when any fails,
// 77 (CTest: skipped) when no GPU is visible. --json FILE writes the results as JSON. In the main
// build, --device cpu runs the same checks on the CPU backend: a test of the checks themselves,
// where no GPU is.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "kernels/accelerator.h"
#include "kernels/cpu/adam_kernel.h"
#include "kernels/cpu/half_convert.h"
#include "kernels/cpu/transformer_kernels.h"
#include "kernels/cuda/cuda_accelerator.h"
#include "test/attention_reference.h"
#include "test/cuda/check_report.h"
#include "test/float_arrays.h"

namespace {

using ds::DType;
using ds::kernels::Accelerator;
using ds::kernels::CopyKind;
using ds::kernels::DeviceBuffer;
using ds::kernels::KernelIsa;
using ds::kernels::Transpose;
using ds::kernels::Unit;
using ds::test::randoms;
using ds::test::Report;
using ds::test::Result;

constexpr double kFp32Tolerance = 1e-5;  // relative (see Report::close)
constexpr double kBf16Tolerance = 1e-2;  // bf16's 8-bit mantissa, rounded once at the output

// Device memory filled from and read back into host vectors, on the current stream (where the
// kernels table launches: a non-blocking stream, which the null stream would not order).
class Device {
 public:
  explicit Device(Accelerator& acc) : acc_(acc) {}
  template <class T>
  DeviceBuffer upload(const std::vector<T>& host) {
    DeviceBuffer b(acc_, host.size() * sizeof(T));
    acc_.copy(b.data(), host.data(), b.bytes(), CopyKind::HostToDevice, acc_.currentStream());
    return b;
  }
  template <class T>
  std::vector<T> download(const DeviceBuffer& b) {
    std::vector<T> host(b.bytes() / sizeof(T));
    acc_.copy(host.data(), b.data(), b.bytes(), CopyKind::DeviceToHost, acc_.currentStream());
    acc_.synchronize(acc_.currentStream());
    return host;
  }

 private:
  Accelerator& acc_;
};

const ds::kernels::TransformerKernels& cpu() {
  return ds::kernels::transformerKernels(KernelIsa::Scalar);
}

const char* unitName(Unit u) {
  switch (u) {
    case Unit::Gelu:
      return "gelu";
    case Unit::Relu:
      return "relu";
    case Unit::Silu:
      return "silu";
    case Unit::Sigmoid:
      return "sigmoid";
    case Unit::Identity:
      return "identity";
    case Unit::Softsign:
      return "softsign";
    case Unit::Mish:
      return "mish";
  }
  return "?";
}

void checkMemoryAndStreams(Accelerator& acc, Report& report) {
  const size_t n = (64u << 20) / sizeof(float) + 3;
  const auto host = randoms(n, 1);
  const size_t bytes = n * sizeof(float);
  auto* pinned = static_cast<float*>(acc.allocatePinned(bytes));
  std::memcpy(pinned, host.data(), bytes);
  DeviceBuffer a(acc, bytes), b(acc, bytes);
  const auto s1 = acc.createStream(), s2 = acc.createStream();
  const auto start = acc.createEvent(), copied = acc.createEvent();
  acc.recordEvent(start, s1);
  acc.copy(a.data(), pinned, bytes, CopyKind::HostToDevice, s1);
  acc.copy(b.data(), a.data(), bytes, CopyKind::DeviceToDevice, s1);
  acc.recordEvent(copied, s1);
  acc.waitEvent(s2, copied);     // s2's read of b must see s1's copy
  acc.synchronizeEvent(copied);  // and the host may overwrite the pinned source only now
  std::memset(pinned, 0, bytes);
  acc.copy(pinned, b.data(), bytes, CopyKind::DeviceToHost, s2);
  acc.synchronize(s2);
  const float ms = acc.elapsedMs(start, copied);
  report.expect("memory: pinned H2D, D2D, D2H over two streams and an event",
                std::memcmp(pinned, host.data(), bytes) == 0,
                "64 MiB H2D+D2D in " + std::to_string(ms) + " ms");
  acc.fillZero(b.data(), bytes, s2);
  acc.copy(pinned, b.data(), sizeof(float) * 4, CopyKind::DeviceToHost, s2);
  acc.synchronize(s2);
  report.expect("memory: fillZero", pinned[0] == 0.0f && pinned[3] == 0.0f, "");
  const auto info = acc.memoryInfo();
  report.expect("memory: memoryInfo", info.totalBytes > 0 && info.freeBytes <= info.totalBytes,
                std::to_string(info.freeBytes >> 20) + " MiB free of " +
                    std::to_string(info.totalBytes >> 20));
  acc.destroyEvent(start);
  acc.destroyEvent(copied);
  acc.destroyStream(s1);
  acc.destroyStream(s2);
  acc.releasePinned(pinned);
}

// c = alpha op(a) op(b) + beta c in double, and the error of `got` normalised by
// sum |alpha a b| + |beta c| per element (the scale fp32 accumulation errors are relative to).
double gemmError(size_t m, size_t n, size_t k, float alpha, const std::vector<float>& a, size_t lda,
                 bool ta, const std::vector<float>& b, size_t ldb, bool tb, float beta,
                 const std::vector<float>& c0, const std::vector<float>& got, size_t ldc) {
  double worst = 0.0;
  for (size_t i = 0; i < m; ++i)
    for (size_t j = 0; j < n; ++j) {
      double sum = 0.0, magnitude = 0.0;
      for (size_t l = 0; l < k; ++l) {
        const double x = ta ? a[l * lda + i] : a[i * lda + l];
        const double y = tb ? b[j * ldb + l] : b[l * ldb + j];
        sum += x * y;
        magnitude += std::fabs(x * y);
      }
      const double ref =
          alpha * sum + (beta != 0.0f ? beta * static_cast<double>(c0[i * ldc + j]) : 0.0);
      magnitude = std::fabs(alpha) * magnitude + std::fabs(beta * c0[i * ldc + j]);
      const double d = std::fabs(got[i * ldc + j] - ref) / (magnitude > 0 ? magnitude : 1.0);
      worst = std::isnan(d) ? NAN : std::max(worst, d);
    }
  return worst;
}

std::vector<float> roundedToBf16(const std::vector<float>& x) {
  std::vector<float> out(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    out[i] = ds::kernels::bf16ToFloat(ds::kernels::floatToBf16(x[i]));
  return out;
}

std::vector<uint16_t> bf16Bits(const std::vector<float>& x) {
  std::vector<uint16_t> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = ds::kernels::floatToBf16(x[i]);
  return out;
}

void checkGemm(Accelerator& acc, Report& report) {
  Device dev(acc);
  struct Shape {
    size_t m, n, k;
  };
  for (Shape s : {Shape{64, 64, 64}, Shape{129, 77, 301}, Shape{256, 384, 768}, Shape{1, 1000, 33}})
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (DType type : {DType::F32, DType::BF16}) {
          const float alpha = 0.75f, beta = ta ? 0.5f : 0.0f;
          const size_t pad = s.m % 2 ? 0 : 8;  // odd shapes dense, the others with padded rows
          const size_t lda = (ta ? s.m : s.k) + pad, ldb = (tb ? s.k : s.n) + pad, ldc = s.n + pad;
          auto a = randoms((ta ? s.k : s.m) * lda, 11), b = randoms((tb ? s.n : s.k) * ldb, 12);
          const auto c0 = randoms(s.m * ldc, 13);
          if (type == DType::BF16) a = roundedToBf16(a), b = roundedToBf16(b);
          DeviceBuffer da = type == DType::F32 ? dev.upload(a) : dev.upload(bf16Bits(a));
          DeviceBuffer db = type == DType::F32 ? dev.upload(b) : dev.upload(bf16Bits(b));
          DeviceBuffer dc = dev.upload(c0);
          char name[96];
          std::snprintf(name, sizeof name, "gemm %s m=%zu n=%zu k=%zu %c%c%s", ds::dtypeName(type),
                        s.m, s.n, s.k, ta ? 'T' : 'N', tb ? 'T' : 'N', beta != 0.0f ? " beta" : "");
          try {  // a shape cuBLASLt refuses fails alone
            acc.gemm(s.m, s.n, s.k, alpha,
                     {da.data(), type, lda, ta ? Transpose::Yes : Transpose::No},
                     {db.data(), type, ldb, tb ? Transpose::Yes : Transpose::No}, beta,
                     {dc.data(), DType::F32, ldc}, acc.currentStream());
          } catch (const ds::Error& e) {
            report.add({name, false, NAN, kFp32Tolerance, e.what()});
            continue;
          }
          const auto got = dev.download<float>(dc);
          const double error =
              gemmError(s.m, s.n, s.k, alpha, a, lda, ta, b, ldb, tb, beta, c0, got, ldc);
          report.add({name, error <= kFp32Tolerance, error, kFp32Tolerance, "vs double"});
        }
  // bf16 in, bf16 out: the fp32 result rounded once.
  const size_t m = 256, n = 384, k = 512;
  const auto a = roundedToBf16(randoms(m * k, 14)), b = roundedToBf16(randoms(k * n, 15));
  DeviceBuffer da = dev.upload(bf16Bits(a)), db = dev.upload(bf16Bits(b));
  DeviceBuffer dc(acc, m * n * sizeof(uint16_t));
  acc.gemm(m, n, k, 1.0f, {da.data(), DType::BF16, k}, {db.data(), DType::BF16, n}, 0.0f,
           {dc.data(), DType::BF16, n}, acc.currentStream());
  const auto bits = dev.download<uint16_t>(dc);
  std::vector<float> got(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) got[i] = ds::kernels::bf16ToFloat(bits[i]);
  const double error = gemmError(m, n, k, 1.0f, a, k, false, b, n, false, 0.0f, got, got, n);
  report.add({"gemm bf16 -> bf16 m=256 n=384 k=512 NN", error <= kBf16Tolerance, error,
              kBf16Tolerance, "vs double"});
}

void checkNorms(Accelerator& acc, Report& report) {
  Device dev(acc);
  const auto& gpu = acc.transformerKernels();
  for (size_t dim : {77, 768, 2048, 5120}) {
    const size_t rows = dim == 5120 ? 257 : 1031;
    const auto x = randoms(rows * dim, 21, 2.0f), w = randoms(dim, 22), b = randoms(dim, 23),
               g = randoms(rows * dim, 24), dw0 = randoms(dim, 25), db0 = randoms(dim, 26);
    const std::string tag = " dim=" + std::to_string(dim) + " rows=" + std::to_string(rows);
    {  // LayerNorm
      std::vector<float> y(rows * dim), mean(rows), rstd(rows), dx(rows * dim), dw = dw0, db = db0;
      cpu().layerNormForward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), rows,
                             dim, 1e-5f);
      cpu().layerNormBackward(dx.data(), dw.data(), db.data(), g.data(), x.data(), mean.data(),
                              rstd.data(), w.data(), rows, dim);
      DeviceBuffer dX = dev.upload(x), dW = dev.upload(w), dB = dev.upload(b), dG = dev.upload(g),
                   dY(acc, y.size() * 4), dMean(acc, rows * 4), dRstd(acc, rows * 4),
                   dDx(acc, dx.size() * 4), dDw = dev.upload(dw0), dDb = dev.upload(db0);
      gpu.layerNormForward(dY.data<float>(), dMean.data<float>(), dRstd.data<float>(),
                           dX.data<float>(), dW.data<float>(), dB.data<float>(), rows, dim, 1e-5f);
      gpu.layerNormBackward(dDx.data<float>(), dDw.data<float>(), dDb.data<float>(),
                            dG.data<float>(), dX.data<float>(), dMean.data<float>(),
                            dRstd.data<float>(), dW.data<float>(), rows, dim);
      report.close("layerNorm forward" + tag, dev.download<float>(dY), y, kFp32Tolerance);
      report.close("layerNorm mean" + tag, dev.download<float>(dMean), mean, kFp32Tolerance);
      report.close("layerNorm rstd" + tag, dev.download<float>(dRstd), rstd, kFp32Tolerance);
      report.close("layerNorm backward dx" + tag, dev.download<float>(dDx), dx, kFp32Tolerance);
      report.close("layerNorm backward dw (+=)" + tag, dev.download<float>(dDw), dw,
                   kFp32Tolerance);
      report.close("layerNorm backward db (+=)" + tag, dev.download<float>(dDb), db,
                   kFp32Tolerance);
    }
    {  // RMSNorm
      std::vector<float> y(rows * dim), norm(rows), dx(rows * dim), dw = dw0;
      cpu().rmsNormForward(y.data(), norm.data(), x.data(), w.data(), rows, dim, 1e-6f);
      cpu().rmsNormBackward(dx.data(), dw.data(), g.data(), x.data(), norm.data(), w.data(), rows,
                            dim, 1e-6f);
      DeviceBuffer dX = dev.upload(x), dW = dev.upload(w), dG = dev.upload(g),
                   dY(acc, y.size() * 4), dNorm(acc, rows * 4), dDx(acc, dx.size() * 4),
                   dDw = dev.upload(dw0);
      gpu.rmsNormForward(dY.data<float>(), dNorm.data<float>(), dX.data<float>(), dW.data<float>(),
                         rows, dim, 1e-6f);
      gpu.rmsNormBackward(dDx.data<float>(), dDw.data<float>(), dG.data<float>(), dX.data<float>(),
                          dNorm.data<float>(), dW.data<float>(), rows, dim, 1e-6f);
      report.close("rmsNorm forward" + tag, dev.download<float>(dY), y, kFp32Tolerance);
      report.close("rmsNorm norm" + tag, dev.download<float>(dNorm), norm, kFp32Tolerance);
      report.close("rmsNorm backward dx" + tag, dev.download<float>(dDx), dx, kFp32Tolerance);
      report.close("rmsNorm backward dw (+=)" + tag, dev.download<float>(dDw), dw, kFp32Tolerance);
    }
  }
}

void checkActivations(Accelerator& acc, Report& report) {
  Device dev(acc);
  const auto& gpu = acc.transformerKernels();
  const size_t n = (1u << 20) + 3, rows = 513, ff = 3072;
  const auto x = randoms(n, 31, 4.0f), dout = randoms(n, 32);
  const auto gin = randoms(rows * 2 * ff, 33, 3.0f), gout = randoms(rows * ff, 34);
  DeviceBuffer dX = dev.upload(x), dDout = dev.upload(dout), dGin = dev.upload(gin),
               dGout = dev.upload(gout), dY(acc, n * 4), dGy(acc, rows * ff * 4),
               dGdin(acc, rows * 2 * ff * 4);
  for (Unit u : {Unit::Gelu, Unit::Silu, Unit::Relu, Unit::Sigmoid, Unit::Identity, Unit::Softsign,
                 Unit::Mish}) {
    const std::string name = unitName(u);
    std::vector<float> y(n), din(n), gy(rows * ff), gdin(rows * 2 * ff);
    cpu().unitForward(u, y.data(), x.data(), n);
    cpu().unitBackward(u, din.data(), dout.data(), x.data(), n);
    cpu().gatedForward(u, gy.data(), gin.data(), rows, ff);
    cpu().gatedBackward(u, gdin.data(), gout.data(), gin.data(), rows, ff);
    gpu.unitForward(u, dY.data<float>(), dX.data<float>(), n);
    report.close(name + " forward n=" + std::to_string(n), dev.download<float>(dY), y,
                 kFp32Tolerance);
    gpu.unitBackward(u, dY.data<float>(), dDout.data<float>(), dX.data<float>(), n);
    report.close(name + " backward", dev.download<float>(dY), din, kFp32Tolerance);
    gpu.gatedForward(u, dGy.data<float>(), dGin.data<float>(), rows, ff);
    report.close(name + " gated forward rows=513 ff=3072", dev.download<float>(dGy), gy,
                 kFp32Tolerance);
    gpu.gatedBackward(u, dGdin.data<float>(), dGout.data<float>(), dGin.data<float>(), rows, ff);
    report.close(name + " gated backward", dev.download<float>(dGdin), gdin, kFp32Tolerance);
  }
}

void checkRotaryAndElementwise(Accelerator& acc, Report& report) {
  Device dev(acc);
  const auto& gpu = acc.transformerKernels();
  const size_t rows = 2048, seq = 512, heads = 12, headDim = 64, stride = 3 * heads * headDim;
  const size_t rotDim = 16, half = rotDim / 2;
  const auto x = randoms(rows * stride, 41), cos = randoms(seq * half, 42),
             sin = randoms(seq * half, 43);
  DeviceBuffer dCos = dev.upload(cos), dSin = dev.upload(sin);
  for (bool inverse : {false, true}) {
    auto ref = x;
    cpu().rotary(ref.data(), rows, seq, heads, headDim, stride, rotDim, cos.data(), sin.data(),
                 inverse);
    DeviceBuffer dX = dev.upload(x);
    gpu.rotary(dX.data<float>(), rows, seq, heads, headDim, stride, rotDim, dCos.data<float>(),
               dSin.data<float>(), inverse);
    report.close(std::string("rotary ") + (inverse ? "inverse" : "forward") +
                     " rows=2048 heads=12 rotDim=16",
                 dev.download<float>(dX), ref, kFp32Tolerance);
  }

  const size_t erows = 1000, eseq = 250, dim = 768, vocab = 5000;
  std::vector<int32_t> ids(erows);
  std::mt19937 rng(44);
  for (int32_t& id : ids) id = static_cast<int32_t>(rng() % vocab);
  const auto table = randoms(vocab * dim, 45), pos = randoms(eseq * dim, 46);
  DeviceBuffer dIds = dev.upload(ids), dTable = dev.upload(table), dPos = dev.upload(pos),
               dOut(acc, erows * dim * 4);
  for (bool withPos : {true, false}) {
    std::vector<float> out(erows * dim);
    cpu().embeddingForward(out.data(), ids.data(), table.data(), withPos ? pos.data() : nullptr,
                           erows, eseq, dim);
    gpu.embeddingForward(dOut.data<float>(), dIds.data<int32_t>(), dTable.data<float>(),
                         withPos ? dPos.data<float>() : nullptr, erows, eseq, dim);
    report.close(std::string("embedding forward") + (withPos ? " + positions" : ""),
                 dev.download<float>(dOut), out, kFp32Tolerance);
  }
  // The scatter-add: ids repeat (1000 rows over 5000 rows of the table, some twice or more).
  const auto embGrad = randoms(erows * dim, 50), dTable0 = randoms(vocab * dim, 51),
             dPos0 = randoms(eseq * dim, 52);
  for (bool withPos : {true, false}) {
    auto wantTable = dTable0, wantPos = dPos0;
    cpu().embeddingBackward(wantTable.data(), withPos ? wantPos.data() : nullptr, ids.data(),
                            embGrad.data(), erows, eseq, dim);
    DeviceBuffer gTable = dev.upload(dTable0), gPos = dev.upload(dPos0), gOut = dev.upload(embGrad);
    gpu.embeddingBackward(gTable.data<float>(), withPos ? gPos.data<float>() : nullptr,
                          dIds.data<int32_t>(), gOut.data<float>(), erows, eseq, dim);
    const std::string name = std::string("embedding backward") + (withPos ? " + positions" : "");
    report.close(name + " (table)", dev.download<float>(gTable), wantTable, kFp32Tolerance);
    if (withPos)
      report.close(name + " (positions)", dev.download<float>(gPos), wantPos, kFp32Tolerance);
  }
  const auto y0 = randoms(erows * dim, 47), bias = randoms(dim, 48), dbias0 = randoms(dim, 49);
  auto y = y0;
  cpu().addBias(y.data(), bias.data(), erows, dim);
  DeviceBuffer dY = dev.upload(y0), dBias = dev.upload(bias), dDbias = dev.upload(dbias0);
  gpu.addBias(dY.data<float>(), dBias.data<float>(), erows, dim);
  report.close("addBias", dev.download<float>(dY), y, kFp32Tolerance);
  auto dbias = dbias0;
  cpu().biasGradient(dbias.data(), y0.data(), erows, dim);
  DeviceBuffer dY0 = dev.upload(y0);
  gpu.biasGradient(dDbias.data<float>(), dY0.data<float>(), erows, dim);
  report.close("biasGradient (+=) rows=1000", dev.download<float>(dDbias), dbias, kFp32Tolerance);
  cpu().add(y.data(), y0.data(), y.size());
  gpu.add(dY.data<float>(), dY0.data<float>(), y.size());
  report.close("add", dev.download<float>(dY), y, kFp32Tolerance);
  std::vector<float> dropped(y0.size());
  const uint32_t threshold = static_cast<uint32_t>(0.1 * (1u << 24));
  cpu().dropout(y0.data(), dropped.data(), y0.size(), 12345, 678, threshold, 1.0f / 0.9f);
  gpu.dropout(dY0.data<float>(), dY.data<float>(), y0.size(), 12345, 678, threshold, 1.0f / 0.9f);
  report.close("dropout p=0.1", dev.download<float>(dY), dropped, kFp32Tolerance);
}

void checkCrossEntropy(Accelerator& acc, Report& report) {
  Device dev(acc);
  const auto& gpu = acc.transformerKernels();
  for (size_t vocab : {50304, 1000, 33}) {
    const size_t rows = 67;
    const auto logits = randoms(rows * vocab, 51, 4.0f);
    std::vector<int32_t> targets(rows);
    std::mt19937 rng(52);
    for (size_t r = 0; r < rows; ++r)
      targets[r] = r % 9 == 4 ? -100 : static_cast<int32_t>(rng() % vocab);
    auto grads = logits;
    const float gradScale = 1.0f / static_cast<float>(rows);
    const double loss = cpu().crossEntropy(grads.data(), targets.data(), rows, vocab, gradScale);
    DeviceBuffer dLogits = dev.upload(logits), dTargets = dev.upload(targets);
    const double gpuLoss =
        gpu.crossEntropy(dLogits.data<float>(), dTargets.data<int32_t>(), rows, vocab, gradScale);
    const std::string tag = " vocab=" + std::to_string(vocab) + " rows=67 (7 masked)";
    const double lossError = std::fabs(gpuLoss - loss) / std::fabs(loss);
    report.add({"crossEntropy loss" + tag, lossError <= kFp32Tolerance, lossError, kFp32Tolerance,
                std::to_string(gpuLoss) + " vs " + std::to_string(loss)});
    report.close("crossEntropy gradients" + tag, dev.download<float>(dLogits), grads,
                 kFp32Tolerance);
  }
}

void checkOptimizer(Accelerator& acc, Report& report) {
  Device dev(acc);
  const size_t count = 10'000'019;
  const auto g = randoms(count, 61);
  for (bool adamw : {false, true})
    for (auto format : {ds::kernels::HalfFormat::Bf16, ds::kernels::HalfFormat::Fp16}) {
      auto p = randoms(count, 62), m = randoms(count, 63, 0.1f), v = randoms(count, 64, 0.01f);
      for (float& x : v) x = std::fabs(x);
      DeviceBuffer dP = dev.upload(p), dG = dev.upload(g), dM = dev.upload(m), dV = dev.upload(v),
                   dHalf(acc, count * 2);
      const auto c = ds::kernels::adamStepConstants(3e-4, 0.9, 0.95, 1e-8, 0.1, adamw, 7);
      ds::kernels::adamUpdate(p.data(), g.data(), m.data(), v.data(), count, c);
      acc.adamStep(dP.data<float>(), dG.data<float>(), dM.data<float>(), dV.data<float>(), count, c,
                   {dHalf.data<uint16_t>(), format}, acc.currentStream());
      const std::string name = std::string(adamw ? "adamw" : "adam") + " n=10000019 (" +
                               (format == ds::kernels::HalfFormat::Bf16 ? "bf16" : "fp16") +
                               " copy)";
      report.close(name + " params", dev.download<float>(dP), p, kFp32Tolerance);
      report.close(name + " m", dev.download<float>(dM), m, kFp32Tolerance);
      report.close(name + " v", dev.download<float>(dV), v, kFp32Tolerance);
      const auto half = dev.download<uint16_t>(dHalf);
      size_t differ = 0;
      for (size_t i = 0; i < count; ++i)
        differ +=
            half[i] != (format == ds::kernels::HalfFormat::Bf16 ? ds::kernels::floatToBf16(p[i])
                                                                : ds::kernels::floatToFp16(p[i]));
      report.expect(name + " = the params rounded", differ == 0,
                    std::to_string(differ) + " differ");
    }
}

void checkUnscale(Accelerator& acc, Report& report) {
  Device dev(acc);
  const size_t count = 3'000'017;
  const auto g = randoms(count, 71, 100.0f);
  std::vector<uint16_t> bf(count), fp(count);
  for (size_t i = 0; i < count; ++i)
    bf[i] = ds::kernels::floatToBf16(g[i]), fp[i] = ds::kernels::floatToFp16(g[i]);
  const float unscale = 1.0f / 4096.0f;
  DeviceBuffer dFlag(acc, 4), dOut(acc, count * 4);
  for (DType type : {DType::F32, DType::BF16, DType::F16})
    for (bool poisoned : {false, true}) {
      std::vector<float> ref(count);
      for (size_t i = 0; i < count; ++i)
        ref[i] = (type == DType::F32    ? g[i]
                  : type == DType::BF16 ? ds::kernels::bf16ToFloat(bf[i])
                                        : ds::kernels::fp16ToFloat(fp[i])) *
                 unscale;
      DeviceBuffer dIn = type == DType::F32    ? dev.upload(g)
                         : type == DType::BF16 ? dev.upload(bf)
                                               : dev.upload(fp);
      if (poisoned) {  // one +inf near the end
        const size_t at = count - 5;
        const float inf = INFINITY;
        const uint16_t bits = type == DType::BF16 ? 0x7f80u : 0x7c00u;
        acc.copy(
            dIn.data<char>() + at * ds::dtypeBytes(type),
            type == DType::F32 ? static_cast<const void*>(&inf) : static_cast<const void*>(&bits),
            ds::dtypeBytes(type), CopyKind::HostToDevice, acc.currentStream());
        ref[at] = INFINITY;
      }
      acc.fillZero(dFlag.data(), 4, acc.currentStream());
      acc.unscaleGradients(dIn.data(), type, dOut.data<float>(), count, unscale,
                           dFlag.data<uint32_t>(), acc.currentStream());
      const std::string name =
          std::string("unscale ") + ds::dtypeName(type) + (poisoned ? " with an inf" : "");
      report.close(name, dev.download<float>(dOut), ref, kFp32Tolerance);
      const uint32_t flag = dev.download<uint32_t>(dFlag)[0];
      report.expect(name + ": overflow flag", flag == (poisoned ? 1u : 0u),
                    "flag " + std::to_string(flag));
    }
}

// Causal attention forward and backward (flash: no [T, T] stored) against the float64 reference
// over the whole matrix: GQA, a sliding window, dropout, heads of 64 and 128, a long sequence.
void checkAttention(Accelerator& acc, Report& report) {
  struct Case {
    size_t samples, seq, heads, kvHeads, headDim, window;
    double dropout;
  };
  Device dev(acc);
  for (const Case& c : {Case{2, 100, 4, 2, 64, 1000, 0.0}, Case{1, 257, 2, 1, 128, 40, 0.1},
                        Case{1, 1024, 4, 4, 64, 1024, 0.0}}) {
    const ds::kernels::AttentionShape s{c.samples, c.seq, c.heads, c.kvHeads, c.headDim,
                                        c.window};
    const std::string tag = " B=" + std::to_string(c.samples) + " T=" + std::to_string(c.seq) +
                            " H=" + std::to_string(c.heads) + "/" + std::to_string(c.kvHeads) +
                            " d=" + std::to_string(c.headDim) + " window=" +
                            std::to_string(c.window) + (c.dropout > 0 ? " dropout" : "");
    const std::vector<float> qkv = randoms(c.samples * c.seq * s.qkvStride(), 31 + c.seq),
                             dCtx = randoms(c.samples * c.seq * s.ctxStride(), 32 + c.seq);
    const ds::test::ReferenceDropout drop(c.dropout, c.samples, 3 * c.seq * c.seq);
    const ds::test::ReferenceDropout* used = c.dropout > 0 ? &drop : nullptr;
    const ds::test::AttentionOutputs want = ds::test::attentionReference(s, qkv, dCtx, used);
    DeviceBuffer dQkv = dev.upload(qkv), dDctx = dev.upload(dCtx),
                 dCtxOut(acc, dCtx.size() * sizeof(float)),
                 dStats(acc, s.statsSize() * sizeof(float)),
                 dDqkv(acc, qkv.size() * sizeof(float));
    acc.attentionForward(s, dQkv.data<float>(), dCtxOut.data<float>(), dStats.data<float>(),
                         used ? &used->spec : nullptr);
    acc.attentionBackward(s, dQkv.data<float>(), dCtxOut.data<float>(), dStats.data<float>(),
                          dDctx.data<float>(), dDqkv.data<float>(), used ? &used->spec : nullptr);
    report.close("attention forward" + tag, dev.download<float>(dCtxOut), want.ctx, 1e-4);
    report.close("attention backward dqkv" + tag, dev.download<float>(dDqkv), want.dqkv, 1e-4);
  }
}

void checkMissingKernels(Accelerator& acc, Report& report) {
  std::string message;
  try {
    acc.transformerKernels().causalSoftmaxForward(nullptr, 4, 4);
  } catch (const ds::Error& e) {
    message = e.what();
  }
  report.expect("a kernel not on the GPU yet throws, naming itself",
                message.find("causalSoftmaxForward is not on the GPU yet") != std::string::npos,
                message);
}

}  // namespace

int main(int argc, char** argv) {
  std::string jsonPath;
  ds::kernels::DeviceKind kind = ds::kernels::DeviceKind::Cuda;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--json" && i + 1 < argc) {
      jsonPath = argv[++i];
    } else if (arg == "--device" && i + 1 < argc &&
               (std::string(argv[i + 1]) == "cuda" || std::string(argv[i + 1]) == "cpu")) {
      // Parsed here: scripts/gpu-check's build has no accelerator.cc (parseDevice).
      kind = std::string(argv[++i]) == "cpu" ? ds::kernels::DeviceKind::Cpu
                                             : ds::kernels::DeviceKind::Cuda;
    } else {
      std::fprintf(stderr, "usage: %s [--json FILE] [--device cuda|cpu]\n", argv[0]);
      return 2;
    }
  }
#if !defined(DS_CUDA_TEST_CPU_BACKEND)
  if (kind == ds::kernels::DeviceKind::Cpu) {
    std::fprintf(stderr, "--device cpu: this build has no CPU backend (scripts/gpu-check's)\n");
    return 2;
  }
#endif
  if (kind == ds::kernels::DeviceKind::Cuda) {
    const std::string why = ds::kernels::cuda::unavailableReason();
    if (!why.empty()) {
      std::printf("SKIPPED: no GPU visible: %s\n", why.c_str());
      return 77;
    }
  }
  const auto start = std::chrono::steady_clock::now();
  Report report;
  std::string device = "?";
  using Check = void (*)(Accelerator&, Report&);
  const std::pair<const char*, Check> checks[] = {{"memory", checkMemoryAndStreams},
                                                  {"gemm", checkGemm},
                                                  {"norms", checkNorms},
                                                  {"activations", checkActivations},
                                                  {"rotary etc.", checkRotaryAndElementwise},
                                                  {"cross-entropy", checkCrossEntropy},
                                                  {"optimizer", checkOptimizer},
                                                  {"unscale", checkUnscale},
                                                  {"attention", checkAttention},
                                                  {"missing kernels", checkMissingKernels}};
  try {
#if defined(DS_CUDA_TEST_CPU_BACKEND)
    Accelerator& acc = ds::kernels::accelerator(kind);
#else
    Accelerator& acc = ds::kernels::cuda::cudaAccelerator();
#endif
    device = acc.deviceName();
    std::printf("device: %s\n", device.c_str());
    const auto stream = acc.createStream();
    acc.setCurrentStream(stream);  // every check works on it
    for (const auto& [name, check] : checks) {
      // The CPU backend has every kernel: calling one with null pointers would crash.
      if (check == checkMissingKernels && acc.kind() == ds::kernels::DeviceKind::Cpu) continue;
      try {  // a check that throws fails alone; the others still run
        check(acc, report);
        acc.synchronizeDevice();
      } catch (const std::exception& e) {
        report.add({std::string(name) + ": stopped", false, NAN, 0.0, e.what()});
      }
    }
    acc.setCurrentStream({});
    acc.destroyStream(stream);
  } catch (const std::exception& e) {
    report.add({"(the checks stopped)", false, NAN, 0.0, e.what()});
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!jsonPath.empty()) report.writeJson(jsonPath, device, seconds);
  std::printf("%d failed, %.1f s\n", report.failures(), seconds);
  return report.failures() == 0 ? 0 : 1;
}
