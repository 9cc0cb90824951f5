#include "kernels/cpu/matmul_peak.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "kernels/cpu/matmul.h"

namespace ds::kernels {

double sgemmPeakGflops(int threads) {
  using Clock = std::chrono::steady_clock;
  const int before = matmulThreads();
  setMatmulThreads(threads);
  constexpr size_t n = 1024;
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n);
  matmul(false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);  // warm-up
  // The best product of at least 5 and at least 0.3 s of them: on a shared machine a single
  // product is often slowed by a neighbour, and a peak should not be.
  double best = 0.0;
  const auto began = Clock::now();
  for (int rep = 0; rep < 5 || Clock::now() - began < std::chrono::milliseconds(300); ++rep) {
    const auto start = Clock::now();
    matmul(false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    const double s = std::chrono::duration<double>(Clock::now() - start).count();
    best = std::max(best, 2.0 * n * n * n / s / 1e9);
  }
  setMatmulThreads(before);
  return best;
}

}  // namespace ds::kernels
