// The optimizer step's passes on the thread pool (runtime/zero/parallel_passes.h): every element
// and every tensor visited exactly once at any thread count (empty tensors too), each tensor's
// total the one-thread value, so the gradient norm's bits do not depend on OMP_NUM_THREADS.
#include "runtime/zero/parallel_passes.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>
#include <vector>

#include "runtime/zero/square_sum.h"
#include "test/scoped_env.h"

using namespace ds::runtime;
using ds::test::ScopedEnv;

TEST_CASE("parallel passes: chunks cover every element once at any thread count") {
  for (int threads : {1, 2, 3, 8}) {
    ScopedEnv env("OMP_NUM_THREADS", std::to_string(threads));  // as a user would set it
    for (size_t count : {size_t{0}, size_t{5}, size_t{65536}, size_t{300001}}) {
      INFO(threads << " threads, " << count << " elements");
      std::vector<int> visits(count, 0);
      forEachChunk(count, [&](size_t begin, size_t end) {
        for (size_t i = begin; i < end; ++i) ++visits[i];
      });
      CHECK(std::count(visits.begin(), visits.end(), 1) == static_cast<long>(count));
    }
  }
}

TEST_CASE("parallel passes: per-tensor totals are the one-thread values, every tensor once") {
  // Uneven tensors, empty ones among them, 1.2M elements in all.
  const std::vector<size_t> sizes = {0, 700000, 3, 0, 250000, 1, 65536, 0, 200000, 17};
  std::vector<std::vector<float>> tensors;
  for (size_t t = 0; t < sizes.size(); ++t) {
    std::vector<float> x(sizes[t]);
    for (size_t i = 0; i < x.size(); ++i) x[i] = 0.001f * static_cast<float>((i * 7 + t) % 1000);
    tensors.push_back(x);
  }
  std::vector<double> oneThread;
  for (int threads : {1, 2, 3, 8}) {
    ScopedEnv env("OMP_NUM_THREADS", std::to_string(threads));
    std::vector<int> visits(sizes.size(), 0);
    const std::vector<double> totals = perTensorTotals(
        sizes.size(), [&](size_t t) { return sizes[t]; },
        [&](size_t t) {
          ++visits[t];
          SquareSum s;
          s.add(tensors[t].data(), tensors[t].size());
          return s.total();
        });
    INFO(threads << " threads");
    CHECK(std::count(visits.begin(), visits.end(), 1) == static_cast<long>(sizes.size()));
    if (threads == 1) oneThread = totals;
    CHECK(totals == oneThread);
  }
  CHECK(oneThread[0] == 0.0);
  CHECK(oneThread[1] > 0.0);
}
