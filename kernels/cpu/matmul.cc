// matmul through oneDNN's sgemm where the build has it (its JIT kernels use AVX-512 wherever the
// CPU has it; Debian's OpenBLAS 0.3.21 runs its AVX2 "Haswell" kernels on AMD Zen 4/5, half the
// speed: figures in docs/benchmarks.md), else OpenBLAS's CBLAS. DS_MATMUL=openblas picks OpenBLAS anyway
// (for comparisons). oneDNN threads with OpenMP: its thread count belongs to the calling thread.
#include "kernels/cpu/matmul.h"

#include <cblas.h>

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
    const dnnl_status_t status =
        dnnl_sgemm(transA ? 'T' : 'N', transB ? 'T' : 'N', static_cast<dnnl_dim_t>(m),
                   static_cast<dnnl_dim_t>(n), static_cast<dnnl_dim_t>(k), alpha, a,
                   static_cast<dnnl_dim_t>(lda), b, static_cast<dnnl_dim_t>(ldb), beta, c,
                   static_cast<dnnl_dim_t>(ldc));
    if (status != dnnl_success)
      throw Error("oneDNN sgemm failed (status " + std::to_string(status) + ") for " +
                  std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k));
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
