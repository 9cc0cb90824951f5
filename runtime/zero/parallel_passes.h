// The optimizer step's passes over the gradient shard (load and unscale, statistics, clip, zero)
// on the kernels' threads (runOnKernelThreads), as CPU-Adam's update beside them: on one thread
// they were most of the step's time at 2 threads (GPT-2 small: 0.47 s of the optimizer's 0.53 s
// at one thread). Every element and every tensor's sum is computed as on one thread: the bits do
// not depend on the thread count. Only for callers outside a kernel-threads task (they do not nest).
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

namespace ds::runtime {

// fn(begin, end) over contiguous runs covering [0, count), at least 64K elements each.
void forEachChunk(size_t count, const std::function<void(size_t begin, size_t end)>& fn);

// fn(t) for every t in [0, n), the tensors split into contiguous runs of about equal `size(t)`.
void forEachTensor(size_t n, const std::function<size_t(size_t t)>& size,
                   const std::function<void(size_t t)>& fn);

// total(t) for every t in [0, n) (a tensor's sum), split as forEachTensor splits them; the results
// in tensor order, for the caller to combine in that order.
std::vector<double> perTensorTotals(size_t n, const std::function<size_t(size_t t)>& size,
                                    const std::function<double(size_t t)>& total);

}  // namespace ds::runtime
