// kernels::matmul against a double-precision reference: every transpose combination, strided
// operands and output, alpha, beta (0 must not read c), and the shapes oneDNN's AVX-512 path
// computes as their transpose (1024 <= m <= 16384, n <= 512, transposed a; in two runs of rows
// where the transposed product passes 16 MiB), at 1 and 2 threads.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/matmul.h"

using ds::kernels::matmul;

namespace {

struct Case {
  bool transA, transB;
  size_t m, n, k;
};

// Values in [-1, 1) from a fixed linear congruential sequence: the same every run.
std::vector<float> filled(size_t count, uint64_t seed) {
  std::vector<float> v(count);
  for (float& x : v) {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    x = static_cast<float>((seed >> 40) % 2048) / 1024.0f - 1.0f;
  }
  return v;
}

void checkProduct(const Case& c, float alpha, float beta) {
  // Every stride two wider than its rows need: the product must honour them.
  const size_t aRows = c.transA ? c.k : c.m, aCols = c.transA ? c.m : c.k;
  const size_t bRows = c.transB ? c.n : c.k, bCols = c.transB ? c.k : c.n;
  const size_t lda = aCols + 2, ldb = bCols + 2, ldc = c.n + 2;
  const std::vector<float> a = filled(aRows * lda, 1), b = filled(bRows * ldb, 2);
  std::vector<float> out = filled(c.m * ldc, 3);
  if (beta == 0.0f) std::fill(out.begin(), out.end(), std::numeric_limits<float>::quiet_NaN());
  const std::vector<float> before = out;
  matmul(c.transA, c.transB, c.m, c.n, c.k, alpha, a.data(), lda, b.data(), ldb, beta, out.data(),
         ldc);
  size_t wrong = 0;
  for (size_t i = 0; i < c.m; ++i) {
    for (size_t j = 0; j < c.n; ++j) {
      double sum = 0, magnitude = 0;
      for (size_t p = 0; p < c.k; ++p) {
        const double x = c.transA ? a[p * lda + i] : a[i * lda + p];
        const double y = c.transB ? b[j * ldb + p] : b[p * ldb + j];
        sum += x * y;
        magnitude += std::fabs(x * y);
      }
      const double old = beta == 0.0f ? 0.0 : before[i * ldc + j];
      const double want = alpha * sum + beta * old;
      const double bound = 1e-6 * (std::fabs(alpha) * magnitude + std::fabs(beta * old)) + 1e-6;
      if (!(std::fabs(out[i * ldc + j] - want) <= bound)) ++wrong;
    }
    for (size_t j = c.n; j < ldc; ++j)  // the padding between rows is not c's: left as it was
      if (!(out[i * ldc + j] == before[i * ldc + j] ||
            (std::isnan(out[i * ldc + j]) && std::isnan(before[i * ldc + j]))))
        ++wrong;
  }
  INFO((c.transA ? "T" : "N") << (c.transB ? "T" : "N") << " " << c.m << "x" << c.n << "x" << c.k
                              << " alpha " << alpha << " beta " << beta);
  CHECK(wrong == 0);
}

}  // namespace

TEST_CASE("matmul: every transpose, strides, alpha and beta against a double reference",
          "[matmul]") {
  const int before = ds::kernels::matmulThreads();
  for (int threads : {1, 2}) {
    ds::kernels::setMatmulThreads(threads);
    for (const Case& c : {Case{false, false, 37, 29, 41}, Case{false, true, 64, 128, 64},
                          Case{true, false, 96, 80, 33}, Case{true, true, 31, 67, 19},
                          Case{true, false, 1024, 256, 96}, Case{true, false, 1100, 130, 70},
                          Case{true, false, 1024, 512, 40}, Case{true, false, 2048, 8, 16},
                          Case{true, false, 16384, 300, 6}, Case{true, false, 16385, 40, 6}})
      for (const float beta : {0.0f, 1.0f, 0.5f}) checkProduct(c, beta == 0.5f ? -0.75f : 1.0f, beta);
  }
  ds::kernels::setMatmulThreads(before);
}
