// A block's element-wise kernels over the OpenMP threads (runtime/model/row_kernels.h): bias adds
// and residual sums are the serial kernel's bits at any thread count; bias gradients, summed per
// block of kRowBlock rows, the same bits at 1, 2 and 3 threads and close to the serial sum, also
// when each block's rows are produced just before they are summed; cross-entropy over the threads,
// the serial kernel's loss and gradient to the last bit.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_accelerator.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/transformer_kernels.h"
#include "runtime/model/parallel_loops.h"
#include "runtime/model/row_kernels.h"
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
  ds::kernels::Accelerator& cpu = ds::kernels::cpuAccelerator();
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
      std::vector<float> biased(a), added(a), summed(n, -1.0f), inPlace(a), grad(kDim, 0.5f);
      ds::kernels::DeviceArray<float> partials;
      gpt::addBiasRows(cpu, k, biased.data(), bias.data(), rows, kDim);
      gpt::addRows(cpu, k, added.data(), b.data(), rows, kDim);
      gpt::sumRows(cpu, k, summed.data(), a.data(), b.data(), rows, kDim);
      gpt::sumRows(cpu, k, inPlace.data(), inPlace.data(), b.data(), rows, kDim);
      gpt::biasGradientRows(cpu, k, grad.data(), a.data(), rows, kDim, partials);
      // Rows written block by block just before they are summed (the activation's backward):
      // every row written once, and the same sums as over rows written beforehand.
      std::vector<float> produced(n, 0.0f), producedGrad(kDim, 0.5f);
      std::vector<int> writes(rows, 0);
      gpt::biasGradientRows(cpu, k, producedGrad.data(), produced.data(), rows, kDim, partials,
                            [&](size_t r0, size_t r1) {
                              for (size_t r = r0; r < r1; ++r) ++writes[r];
                              std::memcpy(produced.data() + r0 * kDim, a.data() + r0 * kDim,
                                          (r1 - r0) * kDim * sizeof(float));
                            });
      CHECK(bitwiseEqual(produced, a));
      CHECK(std::all_of(writes.begin(), writes.end(), [](int w) { return w == 1; }));
      CHECK(bitwiseEqual(producedGrad, grad));
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

TEST_CASE("row kernels: cross-entropy over the threads is the serial kernel's loss and gradient",
          "[kernels]") {
  const auto& k = ds::kernels::transformerKernels();
  ds::kernels::Accelerator& cpu = ds::kernels::cpuAccelerator();
  constexpr size_t kVocab = 77;
  for (size_t rows : kRows) {
    INFO(rows << " rows");
    const auto logits = randoms(rows * kVocab, 4);
    std::vector<int32_t> targets(rows);
    for (size_t r = 0; r < rows; ++r)  // every fifth position masked, as padding is
      targets[r] = r % 5 == 3 ? -1 : static_cast<int32_t>((r * 31) % kVocab);
    std::vector<float> want(logits);
    const double wantLoss = k.crossEntropy(want.data(), targets.data(), rows, kVocab, 0.25f);
    for (int threads : {1, 2, 3}) {
      INFO(threads << " threads");
      ds::kernels::setMatmulThreads(threads);
      std::vector<float> got(logits);
      std::vector<double> rowLosses;
      const double loss =
          gpt::crossEntropyRows(cpu, k, got.data(), targets.data(), rows, kVocab, 0.25f, rowLosses);
      CHECK(std::memcmp(&loss, &wantLoss, sizeof loss) == 0);
      CHECK(bitwiseEqual(got, want));
    }
    ds::kernels::setMatmulThreads(1);
  }
}
