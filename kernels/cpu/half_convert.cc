// Array conversions. bf16: simple loops the compiler vectorises, cloned per instruction set. fp16:
// GCC 12 does not vectorise _Float16 conversions (one scalar F16C instruction per element, which
// made every fp16 array conversion ~10x a bf16 one), so where the CPU has F16C eight values go
// through one vcvtph2ps / vcvtps2ph (round to nearest even, as the scalar conversion: the same
// bits).
#include "kernels/cpu/half_convert.h"

#include <immintrin.h>

#define DS_SIMD_CLONES \
  __attribute__((target_clones("arch=skylake-avx512", "arch=haswell", "default")))

namespace ds::kernels {

DS_SIMD_CLONES void bf16ToFloat(const uint16_t* in, float* out, size_t count) {
  for (size_t i = 0; i < count; ++i) out[i] = bf16ToFloat(in[i]);
}

DS_SIMD_CLONES void floatToBf16(const float* in, uint16_t* out, size_t count) {
  for (size_t i = 0; i < count; ++i) out[i] = floatToBf16(in[i]);
}

namespace {

bool hasF16c() {
  static const bool has = __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
  return has;
}

__attribute__((target("avx,f16c"))) void fp16ToFloatF16c(const uint16_t* in, float* out,
                                                          size_t count) {
  size_t i = 0;
  for (; i + 8 <= count; i += 8)
    _mm256_storeu_ps(out + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))));
  for (; i < count; ++i) out[i] = fp16ToFloat(in[i]);
}

__attribute__((target("avx,f16c"))) void floatToFp16F16c(const float* in, uint16_t* out,
                                                          size_t count) {
  size_t i = 0;
  for (; i + 8 <= count; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < count; ++i) out[i] = floatToFp16(in[i]);
}

}  // namespace

void fp16ToFloat(const uint16_t* in, float* out, size_t count) {
  if (hasF16c()) return fp16ToFloatF16c(in, out, count);
  for (size_t i = 0; i < count; ++i) out[i] = fp16ToFloat(in[i]);
}

void floatToFp16(const float* in, uint16_t* out, size_t count) {
  if (hasF16c()) return floatToFp16F16c(in, out, count);
  for (size_t i = 0; i < count; ++i) out[i] = floatToFp16(in[i]);
}

}  // namespace ds::kernels
