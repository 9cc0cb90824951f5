// The threads a rank's CPU kernels run on. Where the matrix products thread with OpenMP (oneDNN),
// CPU-Adam and the optimizer's passes run on that same OpenMP team, not on ThreadPool::global()'s
// own threads: after a product, libgomp's workers spin for a while waiting for the next region,
// and on a rank with one core per thread they then took a core from the pool's workers (a 2-thread
// optimizer step ran no faster than a 1-thread one; docs/gpt-trainer.md).
#pragma once

#include <functional>

namespace ds::kernels {

// Runs task(i) for every i in [0, count), task 0 on the calling thread, and returns when all have
// finished; rethrows the first exception a task threw. A task must not call it itself.
void runOnKernelThreads(int count, const std::function<void(int)>& task);

}  // namespace ds::kernels
