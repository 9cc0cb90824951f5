// Row-major single-precision matrix products through the BLAS (OpenBLAS on Debian). The one place
// that includes cblas.h, so the rest of the code base does not depend on which BLAS is linked.
#pragma once

#include <cstddef>

namespace ds::kernels {

// c[m, n] = alpha * op(a) * op(b) + beta * c, op(a) [m, k], op(b) [k, n]; lda/ldb/ldc are the
// row strides of a, b, c as stored.
void matmul(bool transA, bool transB, size_t m, size_t n, size_t k, float alpha, const float* a,
            size_t lda, const float* b, size_t ldb, float beta, float* c, size_t ldc);

// Threads the BLAS may use per call (OpenBLAS's own pool). Ranks sharing a node should divide its
// cores between them.
void setMatmulThreads(int threads);
int matmulThreads();
const char* matmulLibrary();  // e.g. "OpenBLAS 0.3.21 (pthreads, Haswell)"
// Whether matmul may be called from several OpenMP threads at once, running single-threaded
// inside them (oneDNN: yes; OpenBLAS's own pthreads would fight over the cores).
bool matmulNestsInOpenMP();
// Does the one-time work of the first matmul of a process (oneDNN JIT-compiles its sgemm kernels
// then: about 20 ms here), so that a spare thread can do it while the process waits for its peers.
// Thread-safe; calling matmul without it is fine.
void prepareMatmul() noexcept;

}  // namespace ds::kernels
