// bf16Reduce on AVX2, 16 bf16 values (two fp32 vectors) per step. bf16 needs no F16C: widening is
// placing the 16 bits above 16 zero bits, rounding is integer arithmetic on the fp32 pattern.
#include <immintrin.h>

#include "kernels/cpu/bf16_round_avx2.h"
#include "kernels/cpu/half_reduce_paths.h"

namespace ds::kernels::detail {
namespace {

// Interleaving with zeros widens values 0-3 and 8-11 (lo) and 4-7 and 12-15 (hi); packing lo and
// hi back with packus undoes exactly that order, so no lane permute is needed either way.
inline __m256 widenLo(__m256i half) {
  return _mm256_castsi256_ps(_mm256_unpacklo_epi16(_mm256_setzero_si256(), half));
}
inline __m256 widenHi(__m256i half) {
  return _mm256_castsi256_ps(_mm256_unpackhi_epi16(_mm256_setzero_si256(), half));
}

// std::max(acc, next) lane by lane: maxps returns its second operand unless the first is greater,
// which is (acc < next ? next : acc) for NaNs and signed zeros too.
inline __m256 combine(__m256 acc, __m256 next, HalfReduceOp op) {
  return op == HalfReduceOp::Max ? _mm256_max_ps(next, acc) : _mm256_add_ps(acc, next);
}

}  // namespace

size_t bf16ReduceAvx2(uint16_t* out, const uint16_t* const* inputs, int n, size_t count,
                      HalfReduceOp op, float scale) {
  constexpr size_t kStep = 16;
  const __m256 factor = _mm256_set1_ps(scale);
  size_t i = 0;
  for (; i + kStep <= count; i += kStep) {
    const __m256i first = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(inputs[0] + i));
    __m256 lo = widenLo(first), hi = widenHi(first);
    for (int k = 1; k < n; ++k) {
      const __m256i next = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(inputs[k] + i));
      lo = combine(lo, widenLo(next), op);
      hi = combine(hi, widenHi(next), op);
    }
    if (op == HalfReduceOp::Avg) {
      lo = _mm256_mul_ps(lo, factor);
      hi = _mm256_mul_ps(hi, factor);
    }
    // Stored only after every input is read: out may be one of them.
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i),
                        _mm256_packus_epi32(roundToBf16Lanes(lo), roundToBf16Lanes(hi)));
  }
  return i;
}

}  // namespace ds::kernels::detail
