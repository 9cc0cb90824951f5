// The norms' backward over row blocks (runtime/model/norm_backward.h) on every instruction-set
// path this CPU has: the same bits at 1, 2 and 3 threads, dx bitwise the one-call kernel's, and
// the weight and bias gradients within rounding of the one-call scalar kernel's row-order sums.
#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_accelerator.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/transformer_kernels.h"
#include "runtime/model/norm_backward.h"
#include "runtime/model/parallel_loops.h"
#include "test/float_arrays.h"
#include "test/skip.h"

using ds::kernels::KernelIsa;
using ds::kernels::TransformerKernels;

using ds::test::bitwiseEqual;
using ds::test::randoms;

namespace {

struct Grads {
  std::vector<float> dx, dw, db;
};

// Rows: none, fewer than a block, whole blocks and a part block; dim not a multiple of 16.
const std::vector<size_t> kRows = {0, 5, 2 * ds::runtime::gpt::kRowBlock, 203};
constexpr size_t kDim = 45;

// LayerNorm (rms = false) or RMSNorm forward by the scalar kernel, then the backward either in
// one call of `k`'s kernel (blocked = false) or over row blocks at `threads` threads.
Grads normBackward(const TransformerKernels& k, bool rms, size_t rows, bool blocked, int threads) {
  const TransformerKernels& scalar = ds::kernels::transformerKernels(KernelIsa::Scalar);
  const auto x = randoms(rows * kDim, 1), w = randoms(kDim, 2), b = randoms(kDim, 3),
             g = randoms(rows * kDim, 4);
  std::vector<float> y(rows * kDim), sa(rows), sb(rows);
  Grads out{std::vector<float>(rows * kDim), std::vector<float>(kDim, 0.5f),
            std::vector<float>(kDim, 0.25f)};  // the backward adds into dw and db
  ds::kernels::DeviceArray<float> partials;
  ds::kernels::setMatmulThreads(threads);
  if (rms) {
    scalar.rmsNormForward(y.data(), sa.data(), x.data(), w.data(), rows, kDim, 1e-6f);
    if (blocked)
      ds::runtime::gpt::rmsNormBackwardRows(ds::kernels::cpuAccelerator(), k, out.dx.data(),
                                            out.dw.data(), g.data(), x.data(), sa.data(), w.data(),
                                            rows, kDim, 1e-6f, partials);
    else
      k.rmsNormBackward(out.dx.data(), out.dw.data(), g.data(), x.data(), sa.data(), w.data(), rows,
                        kDim, 1e-6f);
  } else {
    scalar.layerNormForward(y.data(), sa.data(), sb.data(), x.data(), w.data(), b.data(), rows,
                            kDim, 1e-5f);
    if (blocked)
      ds::runtime::gpt::layerNormBackwardRows(ds::kernels::cpuAccelerator(), k, out.dx.data(),
                                              out.dw.data(), out.db.data(), g.data(), x.data(),
                                              sa.data(), sb.data(), w.data(), rows, kDim, partials);
    else
      k.layerNormBackward(out.dx.data(), out.dw.data(), out.db.data(), g.data(), x.data(),
                          sa.data(), sb.data(), w.data(), rows, kDim);
  }
  ds::kernels::setMatmulThreads(1);
  return out;
}

void checkPath(KernelIsa isa) {
  if (ds::test::skipUnless(ds::kernels::kernelIsaSupported(isa),
                           std::string("this CPU has no ") + ds::kernels::kernelIsaName(isa)))
    return;
  const TransformerKernels& k = ds::kernels::transformerKernels(isa);
  const TransformerKernels& scalar = ds::kernels::transformerKernels(KernelIsa::Scalar);
  for (bool rms : {false, true})
    for (size_t rows : kRows) {
      INFO((rms ? "RMSNorm, " : "LayerNorm, ") << rows << " rows");
      const Grads one = normBackward(k, rms, rows, true, 1);
      for (int threads : {2, 3}) {
        INFO(threads << " threads");
        const Grads many = normBackward(k, rms, rows, true, threads);
        CHECK(bitwiseEqual(many.dx, one.dx));
        CHECK(bitwiseEqual(many.dw, one.dw));
        CHECK(bitwiseEqual(many.db, one.db));
      }
      // The blocked sums are the same bits on every path, like the kernels themselves.
      const Grads scalarBlocked = normBackward(scalar, rms, rows, true, 2);
      CHECK(bitwiseEqual(one.dw, scalarBlocked.dw));
      CHECK(bitwiseEqual(one.db, scalarBlocked.db));
      // Against the scalar kernel's sums in row order: dx is computed row by row either way.
      const Grads serial = normBackward(scalar, rms, rows, false, 1);
      CHECK(bitwiseEqual(one.dx, serial.dx));
      for (size_t i = 0; i < kDim; ++i) {
        CHECK(one.dw[i] == Approx(serial.dw[i]).margin(1e-5).epsilon(1e-5));
        CHECK(one.db[i] == Approx(serial.db[i]).margin(1e-5).epsilon(1e-5));
      }
    }
}

}  // namespace

TEST_CASE("norm backward by row blocks: the scalar path's sums do not depend on the thread count",
          "[kernels]") {
  checkPath(KernelIsa::Scalar);
}

TEST_CASE("norm backward by row blocks: the AVX2 path's sums do not depend on the thread count",
          "[kernels]") {
  checkPath(KernelIsa::Avx2);
}

TEST_CASE("norm backward by row blocks: the AVX-512 path's sums do not depend on the thread count",
          "[kernels]") {
  checkPath(KernelIsa::Avx512);
}
