// The AVX-512 CPU-Adam path: 16 floats per vector. Compiled with -mavx512f -mavx512bw -mavx512vl
// and -ffp-contract=off (kernels/CMakeLists.txt); multiplies and adds stay separate instructions.
#include <immintrin.h>

#include "kernels/cpu/adam_simd_loop.h"

namespace ds::kernels::detail {
namespace {

struct Avx512Ops {
  using Vec = __m512;
  static constexpr size_t kWidth = 16;
  static constexpr uintptr_t kAlignBytes = 64;

  static Vec set1(float x) { return _mm512_set1_ps(x); }
  static Vec load(const float* at) { return _mm512_loadu_ps(at); }
  static void store(float* at, Vec x) { _mm512_storeu_ps(at, x); }
  static Vec add(Vec a, Vec b) { return _mm512_add_ps(a, b); }
  static Vec sub(Vec a, Vec b) { return _mm512_sub_ps(a, b); }
  static Vec mul(Vec a, Vec b) { return _mm512_mul_ps(a, b); }
  static Vec div(Vec a, Vec b) { return _mm512_div_ps(a, b); }
  static Vec sqrt(Vec a) { return _mm512_sqrt_ps(a); }

  // floatToBf16 on 16 lanes; see Avx2Ops::storeBf16 in adam_avx2.cc for the rounding and NaN rule.
  static void storeBf16(uint16_t* at, Vec x) {
    const __m512i bits = _mm512_castps_si512(x);
    const __m512i high = _mm512_srli_epi32(bits, 16);
    const __m512i lsb = _mm512_and_si512(high, _mm512_set1_epi32(1));
    const __m512i rounded = _mm512_srli_epi32(
        _mm512_add_epi32(bits, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
    const __m512i magnitude = _mm512_and_si512(bits, _mm512_set1_epi32(0x7fffffff));
    const __mmask16 isNan = _mm512_cmpgt_epi32_mask(magnitude, _mm512_set1_epi32(0x7f800000));
    const __m512i quietNan = _mm512_or_si512(high, _mm512_set1_epi32(0x40));
    const __m512i result = _mm512_mask_blend_epi32(isNan, rounded, quietNan);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(at), _mm512_cvtepi32_epi16(result));
  }

  static void storeFp16(uint16_t* at, Vec x) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(at),
                        _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
};

}  // namespace

void adamAvx512Path(float* params, const float* grads, float* m, float* v, size_t count,
                    const AdamStepConstants& c, uint16_t* half, HalfFormat format) {
  adamSimdPath<Avx512Ops>(params, grads, m, v, count, c, half, format);
}

}  // namespace ds::kernels::detail
