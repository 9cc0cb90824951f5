// What the matrix products of this machine can reach: a large square sgemm through matmul (the
// same library the trainer uses), the yardstick for bench_gpt's figures and the training jobs'
// closing efficiency line.
#pragma once

namespace ds::kernels {

// The best of at least five 1024^3 sgemms over at least 0.3 s at `threads` threads, in GFLOPS.
// The calling thread's matmul thread count is put back afterwards.
double sgemmPeakGflops(int threads);

}  // namespace ds::kernels
