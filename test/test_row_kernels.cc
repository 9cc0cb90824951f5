// A block's element-wise kernels over the OpenMP threads (runtime/model/row_kernels.h): bias adds
// and residual sums are the serial kernel's bits at any thread count; bias gradients, summed per
// block of kRowBlock rows, the same bits at 1, 2 and 3 threads and close to the serial sum.
#include "runtime/model/row_kernels.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/matmul.h"
#include "kernels/cpu/transformer_kernels.h"
#include "runtime/model/parallel_loops.h"
#include "test/float_arrays.h"

namespace gpt = ds::runtime::gpt;

using ds::test::bitwiseEqual;
using ds::test::randoms;

namespace {

// Rows: none, fewer than a block, whole blocks and a part block; dim not a multiple of 16.
const std::vector<size_t> kRows = {0, 5, 2 * gpt::kRowBlock, 203};
constexpr size_t kDim = 45;

}  // namespace

TEST_CASE("row kernels: the serial kernels' bits, and bias gradients independent of the threads",
          "[kernels]") {
  const auto& k = ds::kernels::transformerKernels();
  for (size_t rows : kRows) {
    INFO(rows << " rows");
    const size_t n = rows * kDim;
    const auto a = randoms(n, 1), b = randoms(n, 2), bias = randoms(kDim, 3);
    std::vector<float> wantBias(a), wantAdd(a), wantSum(a), wantGrad(kDim, 0.5f);
    k.addBias(wantBias.data(), bias.data(), rows, kDim);
    k.add(wantAdd.data(), b.data(), n);
    k.add(wantSum.data(), b.data(), n);  // a + b
    k.biasGradient(wantGrad.data(), a.data(), rows, kDim);
    std::vector<float> oneThreadGrad;
    for (int threads : {1, 2, 3}) {
      INFO(threads << " threads");
      ds::kernels::setMatmulThreads(threads);
      std::vector<float> biased(a), added(a), summed(n, -1.0f), inPlace(a), grad(kDim, 0.5f),
          partials;
      gpt::addBiasRows(k, biased.data(), bias.data(), rows, kDim);
      gpt::addRows(k, added.data(), b.data(), rows, kDim);
      gpt::sumRows(k, summed.data(), a.data(), b.data(), rows, kDim);
      gpt::sumRows(k, inPlace.data(), inPlace.data(), b.data(), rows, kDim);
      gpt::biasGradientRows(k, grad.data(), a.data(), rows, kDim, partials);
      CHECK(bitwiseEqual(biased, wantBias));
      CHECK(bitwiseEqual(added, wantAdd));
      CHECK(bitwiseEqual(summed, wantSum));
      CHECK(bitwiseEqual(inPlace, wantSum));
      if (threads == 1) oneThreadGrad = grad;
      CHECK(bitwiseEqual(grad, oneThreadGrad));
      for (size_t i = 0; i < kDim; ++i)
        CHECK(grad[i] == Approx(wantGrad[i]).margin(1e-5).epsilon(1e-5));
    }
    ds::kernels::setMatmulThreads(1);
  }
}
