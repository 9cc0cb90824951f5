// The CPU-Adam loop (adam_impl.h) compiled for AVX-512 F/BW/VL: 16 floats per vector. With
// -ffp-contract=off (kernels/CMakeLists.txt) multiplies and adds stay separate instructions;
// cpu_adam.cc calls it only where the CPU has these instruction sets.
#include "kernels/cpu/adam_impl.h"

namespace ds::kernels::detail {

void adamAvx512Path(float* params, const float* grads, float* m, float* v, size_t count,
                    const AdamStepConstants& c, uint16_t* half, HalfFormat format) {
  adamSimdPath(params, grads, m, v, count, c, half, format);
}

}  // namespace ds::kernels::detail
