// floatToBf16 (half_convert.h) on 8 AVX2 lanes, for translation units built with AVX2: round to
// nearest even by adding 0x7fff plus the kept part's lowest bit; a NaN instead keeps its top bits
// with the quiet bit set, so that rounding cannot carry it into an infinity. The bf16 bits are
// left in the low 16 bits of each 32-bit lane (the caller packs them in the order it needs).
#pragma once

#include <immintrin.h>

namespace ds::kernels::detail {

inline __m256i roundToBf16Lanes(__m256 value) {
  const __m256i bits = _mm256_castps_si256(value);
  const __m256i high = _mm256_srli_epi32(bits, 16);
  const __m256i lsb = _mm256_and_si256(high, _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_srli_epi32(
      _mm256_add_epi32(bits, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
  const __m256i magnitude = _mm256_and_si256(bits, _mm256_set1_epi32(0x7fffffff));
  const __m256i isNan = _mm256_cmpgt_epi32(magnitude, _mm256_set1_epi32(0x7f800000));
  const __m256i quietNan = _mm256_or_si256(high, _mm256_set1_epi32(0x40));
  return _mm256_blendv_epi8(rounded, quietNan, isNan);
}

}  // namespace ds::kernels::detail
