// Array conversions: simple loops the compiler vectorises, cloned per instruction set (F16C turns
// each fp16 conversion into one instruction per 8 or 16 values).
#include "kernels/cpu/half_convert.h"

#define DS_SIMD_CLONES \
  __attribute__((target_clones("arch=skylake-avx512", "arch=haswell", "default")))

namespace ds::kernels {

DS_SIMD_CLONES void bf16ToFloat(const uint16_t* in, float* out, size_t count) {
  for (size_t i = 0; i < count; ++i) out[i] = bf16ToFloat(in[i]);
}

DS_SIMD_CLONES void floatToBf16(const float* in, uint16_t* out, size_t count) {
  for (size_t i = 0; i < count; ++i) out[i] = floatToBf16(in[i]);
}

DS_SIMD_CLONES void fp16ToFloat(const uint16_t* in, float* out, size_t count) {
  for (size_t i = 0; i < count; ++i) out[i] = fp16ToFloat(in[i]);
}

DS_SIMD_CLONES void floatToFp16(const float* in, uint16_t* out, size_t count) {
  for (size_t i = 0; i < count; ++i) out[i] = floatToFp16(in[i]);
}

}  // namespace ds::kernels
