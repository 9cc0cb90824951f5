// bf16Reduce on AVX-512 (F, BW), 32 bf16 values (two fp32 vectors) per step; the same integer
// widening and rounding as the AVX2 path (bf16_reduce_avx2.cc), on 16 lanes with mask registers.
#include <immintrin.h>

#include "kernels/cpu/bf16_round_avx512.h"
#include "kernels/cpu/half_reduce_paths.h"

namespace ds::kernels::detail {
namespace {

inline __m512 widen(__m256i half) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(half), 16));
}

// (acc < next ? next : acc): see bf16_reduce_avx2.cc.
inline __m512 combine(__m512 acc, __m512 next, HalfReduceOp op) {
  return op == HalfReduceOp::Max ? _mm512_max_ps(next, acc) : _mm512_add_ps(acc, next);
}

inline const __m256i* at(const uint16_t* base, size_t i) {
  return reinterpret_cast<const __m256i*>(base + i);
}

}  // namespace

size_t bf16ReduceAvx512(uint16_t* out, const uint16_t* const* inputs, int n, size_t count,
                        HalfReduceOp op, float scale) {
  constexpr size_t kStep = 32;
  const __m512 factor = _mm512_set1_ps(scale);
  size_t i = 0;
  for (; i + kStep <= count; i += kStep) {
    __m512 lo = widen(_mm256_loadu_si256(at(inputs[0], i)));
    __m512 hi = widen(_mm256_loadu_si256(at(inputs[0], i + 16)));
    for (int k = 1; k < n; ++k) {
      lo = combine(lo, widen(_mm256_loadu_si256(at(inputs[k], i))), op);
      hi = combine(hi, widen(_mm256_loadu_si256(at(inputs[k], i + 16))), op);
    }
    if (op == HalfReduceOp::Avg) {
      lo = _mm512_mul_ps(lo, factor);
      hi = _mm512_mul_ps(hi, factor);
    }
    // Stored only after every input is read: out may be one of them.
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), roundToBf16(lo));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i + 16), roundToBf16(hi));
  }
  return i;
}

}  // namespace ds::kernels::detail
