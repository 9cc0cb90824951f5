// fp16Reduce on AVX-512 (F), 32 fp16 values (two fp32 vectors) per step; the conversions of the
// AVX2 path (fp16_reduce_avx2.cc) on 16 lanes.
#include <immintrin.h>

#include "kernels/cpu/half_reduce_paths.h"

namespace ds::kernels::detail {
namespace {

constexpr int kNearestEven = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

inline __m512 widen(const uint16_t* at) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(at)));
}

inline void narrow(uint16_t* at, __m512 value) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(at), _mm512_cvtps_ph(value, kNearestEven));
}

// (acc < next ? next : acc): see bf16_reduce_avx2.cc.
inline __m512 combine(__m512 acc, __m512 next, HalfReduceOp op) {
  return op == HalfReduceOp::Max ? _mm512_max_ps(next, acc) : _mm512_add_ps(acc, next);
}

}  // namespace

size_t fp16ReduceAvx512(uint16_t* out, const uint16_t* const* inputs, int n, size_t count,
                        HalfReduceOp op, float scale) {
  constexpr size_t kStep = 32;
  const __m512 factor = _mm512_set1_ps(scale);
  size_t i = 0;
  for (; i + kStep <= count; i += kStep) {
    __m512 lo = widen(inputs[0] + i), hi = widen(inputs[0] + i + 16);
    for (int k = 1; k < n; ++k) {
      lo = combine(lo, widen(inputs[k] + i), op);
      hi = combine(hi, widen(inputs[k] + i + 16), op);
    }
    if (op == HalfReduceOp::Avg) {
      lo = _mm512_mul_ps(lo, factor);
      hi = _mm512_mul_ps(hi, factor);
    }
    // Stored only after every input is read: out may be one of them.
    narrow(out + i, lo);
    narrow(out + i + 16, hi);
  }
  return i;
}

}  // namespace ds::kernels::detail
