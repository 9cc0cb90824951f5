// What the matrix products of this machine can reach: a large square sgemm through matmul (the
// same library the trainer uses), the yardstick for bench_gpt's figures and the training jobs'
// closing efficiency line.
#pragma once

namespace ds::kernels {

// The best of five 1024^3 sgemms at `threads` threads, in GFLOPS (about 0.1 s at 2 threads here).
// The calling thread's matmul thread count is put back afterwards.
double sgemmPeakGflops(int threads);

}  // namespace ds::kernels
