// What the matrix products of this machine can reach: a large square sgemm through matmul (the
// same library the trainer uses), the yardstick for bench_gpt's figures and the training jobs'
// closing efficiency line.
#pragma once

namespace ds::kernels {

// The best of at least `products` 1024^3 sgemms over at least `seconds` at `threads` threads, in
// GFLOPS. The calling thread's matmul thread count is put back afterwards. One product with no
// time floor is a sample to take between a benchmark's timed steps, where the machine's speed at
// that moment is the speed the steps ran at (shared machines drift by 10-30% within a minute).
double sgemmPeakGflops(int threads, int products = 5, double seconds = 0.3);

}  // namespace ds::kernels
