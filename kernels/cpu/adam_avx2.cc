// The AVX2 (+F16C) CPU-Adam path: 8 floats per vector. Compiled with -mavx2 -mf16c and
// -ffp-contract=off (kernels/CMakeLists.txt); no -mfma, so no multiply-add can be fused.
#include <immintrin.h>

#include "kernels/cpu/adam_simd_loop.h"

namespace ds::kernels::detail {
namespace {

struct Avx2Ops {
  using Vec = __m256;
  static constexpr size_t kWidth = 8;
  static constexpr uintptr_t kAlignBytes = 32;

  static Vec set1(float x) { return _mm256_set1_ps(x); }
  static Vec load(const float* at) { return _mm256_loadu_ps(at); }
  static void store(float* at, Vec x) { _mm256_storeu_ps(at, x); }
  static Vec add(Vec a, Vec b) { return _mm256_add_ps(a, b); }
  static Vec sub(Vec a, Vec b) { return _mm256_sub_ps(a, b); }
  static Vec mul(Vec a, Vec b) { return _mm256_mul_ps(a, b); }
  static Vec div(Vec a, Vec b) { return _mm256_div_ps(a, b); }
  static Vec sqrt(Vec a) { return _mm256_sqrt_ps(a); }

  // floatToBf16 on 8 lanes: round to nearest even on the bit pattern; a NaN keeps its top bits and
  // is forced quiet (bit 6 of the bf16) so truncation cannot turn it into an infinity.
  static void storeBf16(uint16_t* at, Vec x) {
    const __m256i bits = _mm256_castps_si256(x);
    const __m256i high = _mm256_srli_epi32(bits, 16);
    const __m256i lsb = _mm256_and_si256(high, _mm256_set1_epi32(1));
    const __m256i rounded = _mm256_srli_epi32(
        _mm256_add_epi32(bits, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
    const __m256i magnitude = _mm256_and_si256(bits, _mm256_set1_epi32(0x7fffffff));
    const __m256i isNan = _mm256_cmpgt_epi32(magnitude, _mm256_set1_epi32(0x7f800000));
    const __m256i quietNan = _mm256_or_si256(high, _mm256_set1_epi32(0x40));
    const __m256i result = _mm256_blendv_epi8(rounded, quietNan, isNan);
    // packus works within 128-bit lanes: [r0..r3 r0..r3 | r4..r7 r4..r7]; take quadwords 0 and 2.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(result, result), 0x08);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(at), _mm256_castsi256_si128(packed));
  }

  static void storeFp16(uint16_t* at, Vec x) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(at),
                     _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
};

}  // namespace

void adamAvx2Path(float* params, const float* grads, float* m, float* v, size_t count,
                  const AdamStepConstants& c, uint16_t* half, HalfFormat format) {
  adamSimdPath<Avx2Ops>(params, grads, m, v, count, c, half, format);
}

}  // namespace ds::kernels::detail
