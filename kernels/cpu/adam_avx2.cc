// The CPU-Adam loop (adam_impl.h) compiled for AVX2 with F16C: 8 floats per vector. No -mfma and
// -ffp-contract=off (kernels/CMakeLists.txt), so no multiply-add can be fused; cpu_adam.cc calls it
// only where the CPU has both instruction sets.
#include "kernels/cpu/adam_impl.h"

namespace ds::kernels::detail {

void adamAvx2Path(float* params, const float* grads, float* m, float* v, size_t count,
                  const AdamStepConstants& c, uint16_t* half, HalfFormat format) {
  adamSimdPath(params, grads, m, v, count, c, half, format);
}

}  // namespace ds::kernels::detail
