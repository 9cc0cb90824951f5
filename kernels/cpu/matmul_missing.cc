// kernels/cpu/matmul.h without a BLAS, for builds whose models compute on a GPU only: CMake's
// DS_MATMUL_LIBRARY=NONE (scripts/gpu-bundle, whose binaries travel to a GPU machine where
// oneDNN and OpenBLAS are not installed and too large to carry) and scripts/gpu-check's own
// project. A CPU product is then an error naming the build, never a slow fallback; nothing on
// the GPU path reaches one (the CPU trainers are refused on cuda, and the efficiency line, which
// measures the CPU's sgemm peak, is left out there).
#include "common/error.h"
#include "kernels/cpu/matmul.h"

namespace ds::kernels {

void matmul(bool, bool, size_t, size_t, size_t, float, const float*, size_t, const float*, size_t,
            float, float*, size_t) {
  throw Error(
      "matmul: this build has no CPU matrix products (DS_MATMUL_LIBRARY=NONE, a GPU-only "
      "build): train with --device cuda, or use a build with oneDNN or OpenBLAS");
}

void setMatmulThreads(int) {}
int matmulThreads() { return 1; }
const char* matmulLibrary() { return "none (a GPU-only build)"; }
bool matmulNestsInOpenMP() { return false; }
void prepareMatmul() noexcept {}

}  // namespace ds::kernels
