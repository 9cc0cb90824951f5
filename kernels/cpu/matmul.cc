// matmul through OpenBLAS's CBLAS interface.
#include "kernels/cpu/matmul.h"

#include <cblas.h>

namespace ds::kernels {

void matmul(bool transA, bool transB, size_t m, size_t n, size_t k, float alpha, const float* a,
            size_t lda, const float* b, size_t ldb, float beta, float* c, size_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // BLAS leaves C alone for k == 0 only when beta == 1: make the contract explicit
    for (size_t i = 0; i < m; ++i)
      for (size_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
    return;
  }
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, a,
              static_cast<int>(lda), b, static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
}

void setMatmulThreads(int threads) { openblas_set_num_threads(threads < 1 ? 1 : threads); }

int matmulThreads() { return openblas_get_num_threads(); }

const char* matmulLibrary() { return openblas_get_config(); }

}  // namespace ds::kernels
