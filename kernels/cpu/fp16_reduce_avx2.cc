// fp16Reduce on AVX2 with F16C, 16 fp16 values (two fp32 vectors) per step. vcvtph2ps widens
// exactly (denormals included); vcvtps2ph with round-to-nearest-even narrows as the scalar
// _Float16 conversion does, NaNs quieted with their top payload bits kept.
#include <immintrin.h>

#include "kernels/cpu/half_reduce_paths.h"

namespace ds::kernels::detail {
namespace {

constexpr int kNearestEven = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

inline __m256 widen(const uint16_t* at) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(at)));
}

inline void narrow(uint16_t* at, __m256 value) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(at), _mm256_cvtps_ph(value, kNearestEven));
}

// (acc < next ? next : acc): see bf16_reduce_avx2.cc.
inline __m256 combine(__m256 acc, __m256 next, HalfReduceOp op) {
  return op == HalfReduceOp::Max ? _mm256_max_ps(next, acc) : _mm256_add_ps(acc, next);
}

}  // namespace

size_t fp16ReduceAvx2(uint16_t* out, const uint16_t* const* inputs, int n, size_t count,
                      HalfReduceOp op, float scale) {
  constexpr size_t kStep = 16;
  const __m256 factor = _mm256_set1_ps(scale);
  size_t i = 0;
  for (; i + kStep <= count; i += kStep) {
    __m256 lo = widen(inputs[0] + i), hi = widen(inputs[0] + i + 8);
    for (int k = 1; k < n; ++k) {
      lo = combine(lo, widen(inputs[k] + i), op);
      hi = combine(hi, widen(inputs[k] + i + 8), op);
    }
    if (op == HalfReduceOp::Avg) {
      lo = _mm256_mul_ps(lo, factor);
      hi = _mm256_mul_ps(hi, factor);
    }
    // Stored only after every input is read: out may be one of them.
    narrow(out + i, lo);
    narrow(out + i + 8, hi);
  }
  return i;
}

}  // namespace ds::kernels::detail
