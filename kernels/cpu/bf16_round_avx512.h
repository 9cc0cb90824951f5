// floatToBf16 (half_convert.h) on 16 AVX-512 lanes, for translation units built with AVX-512 F and
// BW: the rounding and NaN rule of bf16_round_avx2.h, narrowed to 16 packed bf16 values.
#pragma once

#include <immintrin.h>

namespace ds::kernels::detail {

inline __m256i roundToBf16(__m512 value) {
  const __m512i bits = _mm512_castps_si512(value);
  const __m512i high = _mm512_srli_epi32(bits, 16);
  const __m512i lsb = _mm512_and_si512(high, _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_srli_epi32(
      _mm512_add_epi32(bits, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
  const __m512i magnitude = _mm512_and_si512(bits, _mm512_set1_epi32(0x7fffffff));
  const __mmask16 isNan = _mm512_cmpgt_epi32_mask(magnitude, _mm512_set1_epi32(0x7f800000));
  const __m512i quietNan = _mm512_or_si512(high, _mm512_set1_epi32(0x40));
  return _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(isNan, rounded, quietNan));
}

}  // namespace ds::kernels::detail
