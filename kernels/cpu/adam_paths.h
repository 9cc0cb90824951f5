// The single-thread CPU-Adam paths cpu_adam.cc dispatches to, one per instruction set. Internal to
// ds_kernels. half may be null (no copy); format is then ignored.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/adam_kernel.h"
#include "kernels/cpu/cpu_adam.h"

namespace ds::kernels::detail {

// adamUpdate plus the half copy block by block. Also the head and tail of the vector paths, which
// call it rather than inline header code (see simd_vec.h for why).
void adamScalarPath(float* params, const float* grads, float* m, float* v, size_t count,
                    const AdamStepConstants& c, uint16_t* half, HalfFormat format);

// Only call these where adamSimdSupported() says so: they are compiled for AVX2+F16C and
// AVX-512F/BW/VL and raise SIGILL elsewhere.
void adamAvx2Path(float* params, const float* grads, float* m, float* v, size_t count,
                  const AdamStepConstants& c, uint16_t* half, HalfFormat format);
void adamAvx512Path(float* params, const float* grads, float* m, float* v, size_t count,
                    const AdamStepConstants& c, uint16_t* half, HalfFormat format);

}  // namespace ds::kernels::detail
