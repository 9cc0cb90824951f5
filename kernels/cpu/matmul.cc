// matmul through oneDNN's sgemm where the build has it (its JIT kernels use AVX-512 wherever the
// CPU has it; Debian's OpenBLAS 0.3.21 runs its AVX2 "Haswell" kernels on AMD Zen 4/5, half the
// speed: figures in docs/benchmarks.md), else OpenBLAS's CBLAS. DS_MATMUL=openblas picks OpenBLAS
// anyway (for comparisons). oneDNN threads with OpenMP: its thread count belongs to the calling
// thread. The one shape oneDNN's AVX-512 path is slow at is computed as its transpose
// (transposeIsFaster).
#include "kernels/cpu/matmul.h"

#include <cblas.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/error.h"

#if DS_HAVE_DNNL
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#endif

namespace ds::kernels {
namespace {

bool useOneDnn() {
#if DS_HAVE_DNNL
  static const bool use = [] {
    const char* asked = std::getenv("DS_MATMUL");
    if (!asked || !*asked || std::string(asked) == "onednn") return true;
    if (std::string(asked) == "openblas") return false;
    throw Error(std::string("DS_MATMUL=") + asked + ": expected onednn or openblas");
  }();
  return use;
#else
  return false;
#endif
}

#if DS_HAVE_DNNL
// oneDNN 2.6's AVX-512 sgemm runs a product with a transposed, tall A and a narrow B (a weight
// gradient dY^T X of a layer that widens: fc1's, QKV's, at hidden <= 512) 1.3-1.6x slower than the
// same product computed as its transpose, C^T = op(B)^T op(A)^T, plus a pass that writes C from it
// (1024 <= m <= 16384 and n <= 512, 1 thread, k = 512-4096; 1.1-1.4x at 2 threads). At smaller m
// the two were within 10% of each other, at a vocabulary-sized m (50304) the transpose lost by up
// to 25%, and on AVX2 it lost by up to 12%: figures in docs/benchmarks.md. The choice depends on
// the shape and the ISA only, so results stay reproducible.
bool transposeIsFaster(bool transA, bool transB, size_t m, size_t n) {
  static const bool avx512 = (dnnl_get_effective_cpu_isa() & dnnl_cpu_isa_avx512_core) ==
                             dnnl_cpu_isa_avx512_core;
  return avx512 && transA && !transB && m >= 1024 && m <= 16384 && n <= 512;
}

// c[i, j] = t[j, i] + beta * c[i, j] for t [n, m], in tiles both sides of which stay in L1.
void writeTransposed(size_t m, size_t n, const float* t, float beta, float* c, size_t ldc) {
  constexpr size_t kTile = 32;
  const long tiles = static_cast<long>((m + kTile - 1) / kTile);
#pragma omp parallel for schedule(static)
  for (long tile = 0; tile < tiles; ++tile) {
    const size_t i0 = static_cast<size_t>(tile) * kTile, i1 = std::min(m, i0 + kTile);
    for (size_t j0 = 0; j0 < n; j0 += kTile) {
      const size_t j1 = std::min(n, j0 + kTile);
      for (size_t i = i0; i < i1; ++i) {
        float* row = c + i * ldc;
        if (beta == 0.0f)  // BLAS's contract: c is not read, whatever it holds
          for (size_t j = j0; j < j1; ++j) row[j] = t[j * m + i];
        else
          for (size_t j = j0; j < j1; ++j) row[j] = t[j * m + i] + beta * row[j];
      }
    }
  }
}

void onednnSgemm(bool transA, bool transB, size_t m, size_t n, size_t k, float alpha,
                 const float* a, size_t lda, const float* b, size_t ldb, float beta, float* c,
                 size_t ldc) {
  const dnnl_status_t status =
      dnnl_sgemm(transA ? 'T' : 'N', transB ? 'T' : 'N', static_cast<dnnl_dim_t>(m),
                 static_cast<dnnl_dim_t>(n), static_cast<dnnl_dim_t>(k), alpha, a,
                 static_cast<dnnl_dim_t>(lda), b, static_cast<dnnl_dim_t>(ldb), beta, c,
                 static_cast<dnnl_dim_t>(ldc));
  if (status != dnnl_success)
    throw Error("oneDNN sgemm failed (status " + std::to_string(status) + ") for " +
                std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k));
}
#endif

}  // namespace

void matmul(bool transA, bool transB, size_t m, size_t n, size_t k, float alpha, const float* a,
            size_t lda, const float* b, size_t ldb, float beta, float* c, size_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // BLAS leaves C alone for k == 0 only when beta == 1: make the contract explicit
    for (size_t i = 0; i < m; ++i)
      for (size_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
    return;
  }
#if DS_HAVE_DNNL
  if (useOneDnn()) {
    if (!transposeIsFaster(transA, transB, m, n))
      return onednnSgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    // op(A) op(B) = (op(B)^T op(A)^T)^T: b and a swap places and each keeps its storage. In runs of
    // rows whose transposed product fits 16 MiB (at most two here), the scratch a thread keeps;
    // a is transposed here, so a run's rows of op(A) are columns of a, from a + r0.
    constexpr size_t kScratchFloats = size_t{4} << 20;
    const size_t runs = (m * n + kScratchFloats - 1) / kScratchFloats;
    thread_local std::vector<float> transposed;
    for (size_t run = 0; run < runs; ++run) {
      const size_t r0 = m * run / runs, rows = m * (run + 1) / runs - r0;
      transposed.resize(rows * n);
      onednnSgemm(!transB, !transA, n, rows, k, alpha, b, ldb, a + r0, lda, 0.0f,
                  transposed.data(), rows);
      writeTransposed(rows, n, transposed.data(), beta, c + r0 * ldc, ldc);
    }
    return;
  }
#endif
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, a,
              static_cast<int>(lda), b, static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
}

void setMatmulThreads(int threads) {
  threads = threads < 1 ? 1 : threads;
  openblas_set_num_threads(threads);
#if DS_HAVE_DNNL
  omp_set_num_threads(threads);
#endif
}

int matmulThreads() {
#if DS_HAVE_DNNL
  if (useOneDnn()) return omp_get_max_threads();
#endif
  return openblas_get_num_threads();
}

bool matmulNestsInOpenMP() { return useOneDnn(); }

void prepareMatmul() noexcept {
#if DS_HAVE_DNNL
  try {
    if (!useOneDnn()) return;
  } catch (const Error&) {
    return;  // a bad DS_MATMUL: the first real matmul reports it
  }
  omp_set_num_threads(1);  // this thread's own setting: it starts no OpenMP team of its own
  // Smaller products take oneDNN's reference path and compile nothing.
  constexpr dnnl_dim_t n = 128;
  std::vector<float> a(n * n, 0.0f), c(n * n);
  dnnl_sgemm('N', 'N', n, n, n, 1.0f, a.data(), n, a.data(), n, 0.0f, c.data(), n);
#endif
}

const char* matmulLibrary() {
#if DS_HAVE_DNNL
  if (useOneDnn()) {
    static const std::string name = [] {
      const dnnl_version_t* v = dnnl_version();
      return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
             std::to_string(v->patch) + " sgemm (OpenMP threads)";
    }();
    return name.c_str();
  }
#endif
  return openblas_get_config();
}

}  // namespace ds::kernels
