#include "kernels/cpu/matmul_peak.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "kernels/cpu/matmul.h"

namespace ds::kernels {

double sgemmPeakGflops(int threads, int products, double seconds) {
  using Clock = std::chrono::steady_clock;
  const int before = matmulThreads();
  setMatmulThreads(threads);
  constexpr size_t n = 1024;
  // Allocated once a thread: bench_gpt samples one product between every two timed steps.
  static thread_local std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n);
  // The first product of a process compiles oneDNN's kernels; the first at a thread count starts
  // its threads.
  static thread_local int warmedAt = 0;
  if (warmedAt != threads) {
    matmul(false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    warmedAt = threads;
  }
  // The best product, not the mean: on a shared machine a single product is often slowed by a
  // neighbour, and a peak should not be.
  double best = 0.0;
  const auto began = Clock::now();
  for (int rep = 0;
       rep < products || std::chrono::duration<double>(Clock::now() - began).count() < seconds;
       ++rep) {
    const auto start = Clock::now();
    matmul(false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    const double s = std::chrono::duration<double>(Clock::now() - start).count();
    best = std::max(best, 2.0 * n * n * n / s / 1e9);
  }
  setMatmulThreads(before);
  return best;
}

}  // namespace ds::kernels
