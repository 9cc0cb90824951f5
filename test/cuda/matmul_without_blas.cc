// kernels/cpu/matmul.h for scripts/gpu-check's build, which has no BLAS (the GPU machine has none
// to rely on): the model's sources still name some of these (the MoE experts' thread plan), but
// a Gpt built on the CUDA backend never reaches them (MoE is refused there), so matmul throws
// rather than computes. The main build links kernels/cpu/matmul.cc instead.
#include "common/error.h"
#include "kernels/cpu/matmul.h"

namespace ds::kernels {

void matmul(bool, bool, size_t, size_t, size_t, float, const float*, size_t, const float*, size_t,
            float, float*, size_t) {
  throw Error("matmul: scripts/gpu-check's build has no BLAS; CPU products run in the main build");
}

void setMatmulThreads(int) {}
int matmulThreads() { return 1; }
const char* matmulLibrary() { return "none (scripts/gpu-check's build)"; }
bool matmulNestsInOpenMP() { return false; }
void prepareMatmul() noexcept {}

}  // namespace ds::kernels
