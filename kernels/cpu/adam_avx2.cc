// The AVX2 (+F16C) CPU-Adam path: 8 floats per vector. Compiled with -mavx2 -mf16c and
// -ffp-contract=off (kernels/CMakeLists.txt); no -mfma, so no multiply-add can be fused.
#include <immintrin.h>

#include "kernels/cpu/adam_simd_loop.h"
#include "kernels/cpu/bf16_round_avx2.h"

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

  // floatToBf16 on 8 lanes (bf16_round_avx2.h).
  static void storeBf16(uint16_t* at, Vec x) {
    const __m256i result = roundToBf16Lanes(x);
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
