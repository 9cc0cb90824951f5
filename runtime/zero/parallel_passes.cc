#include "runtime/zero/parallel_passes.h"

#include <algorithm>

#include "kernels/cpu/kernel_threads.h"

namespace ds::runtime {
namespace {

constexpr size_t kMinPerPart = size_t{1} << 16;  // below it a hand-off costs more than it saves

size_t partsFor(size_t count) {
  const size_t threads = static_cast<size_t>(kernels::kernelThreads());
  return std::clamp<size_t>(count / kMinPerPart, 1, threads);
}

}  // namespace

void forEachChunk(size_t count, const std::function<void(size_t begin, size_t end)>& fn) {
  if (count == 0) return;
  const size_t parts = partsFor(count);
  if (parts == 1) return fn(0, count);
  kernels::runOnKernelThreads(static_cast<int>(parts), [&](int part) {
    const size_t p = static_cast<size_t>(part);
    fn(count * p / parts, count * (p + 1) / parts);
  });
}

void forEachTensor(size_t n, const std::function<size_t(size_t t)>& size,
                   const std::function<void(size_t t)>& fn) {
  std::vector<size_t> ends(n);  // cumulative sizes: a part takes the tensors ending in its share
  size_t all = 0;
  for (size_t t = 0; t < n; ++t) ends[t] = all += size(t);
  const size_t parts = std::min(partsFor(all), std::max<size_t>(n, 1));
  if (parts <= 1) {
    for (size_t t = 0; t < n; ++t) fn(t);
    return;
  }
  // Part p takes the tensors whose cumulative end lies in (all p / parts, all (p + 1) / parts].
  auto firstOf = [&](size_t p) {
    const size_t bound = all * p / parts;
    return static_cast<size_t>(std::upper_bound(ends.begin(), ends.end(), bound) - ends.begin());
  };
  kernels::runOnKernelThreads(static_cast<int>(parts), [&](int part) {
    const size_t p = static_cast<size_t>(part);
    const size_t last = p + 1 == parts ? n : firstOf(p + 1);
    for (size_t t = p == 0 ? 0 : firstOf(p); t < last; ++t) fn(t);
  });
}

std::vector<double> perTensorTotals(size_t n, const std::function<size_t(size_t t)>& size,
                                    const std::function<double(size_t t)>& total) {
  std::vector<double> totals(n);
  forEachTensor(n, size, [&](size_t t) { totals[t] = total(t); });
  return totals;
}

}  // namespace ds::runtime
