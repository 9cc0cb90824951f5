// The threads a rank's CPU kernels run on: how many, and which. Where the matrix products thread
// with OpenMP (oneDNN), CPU-Adam and the optimizer's passes run on that same OpenMP team, not on
// ThreadPool::global()'s own threads: after a product, libgomp's workers spin for a while waiting
// for the next region, and on a rank with one core per thread they then took a core from the
// pool's workers (a 2-thread optimizer step ran no faster than a 1-thread one;
// docs/gpt-trainer.md).
#pragma once

#include <functional>

namespace ds::kernels {

// How many threads a kernel call (CPU-Adam, the optimizer's passes, the matrix products) may
// use: OMP_NUM_THREADS where it is set, as DeepSpeed's OpenMP CPU-Adam decides; else the share
// setKernelThreads gave this process; else every CPU it may run on (ds::usableCores).
int kernelThreads();

// The count kernelThreads() gives where OMP_NUM_THREADS is unset; 0 takes it back. ds-worker
// gives each rank its share of the node's CPUs, so that ranks on one node do not oversubscribe it.
void setKernelThreads(int threads);

// Runs task(i) for every i in [0, count), task 0 on the calling thread, and returns when all have
// finished; rethrows the first exception a task threw. A task must not call it itself.
void runOnKernelThreads(int count, const std::function<void(int)>& task);

}  // namespace ds::kernels
