// CPU-Adam: the Adam/AdamW step of adam_kernel.h at memory speed. AVX-512 or AVX2 chosen at run
// time, spread over the kernels' threads (kernel_threads.h), optionally writing the updated params
// as bf16/fp16 in the same pass. Every path gives bitwise the same params, m and v as the scalar
// adamUpdate.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/adam_kernel.h"

namespace ds::kernels {

enum class AdamSimd { Scalar, Avx2, Avx512 };

AdamSimd bestAdamSimd();  // the widest path this CPU runs
const char* adamSimdName(AdamSimd);
bool adamSimdSupported(AdamSimd);

enum class HalfFormat { None, Bf16, Fp16 };

struct HalfCopy {
  uint16_t* out = nullptr;
  HalfFormat format = HalfFormat::None;
};

// Same maths as adamUpdate over [0, count); when copy.out is set also writes the updated params
// rounded to bf16/fp16 (as floatToBf16/floatToFp16 would) in the same pass. threads <= 0:
// kernelThreads() (kernel_threads.h). Throws ds::Error for a path this CPU lacks or a copy without
// a format.
void cpuAdamStep(float* params, const float* grads, float* m, float* v, size_t count,
                 const AdamStepConstants& c, const HalfCopy& copy = {}, int threads = 0,
                 AdamSimd simd = bestAdamSimd());

}  // namespace ds::kernels
