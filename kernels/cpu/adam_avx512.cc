// The AVX-512 CPU-Adam path: 16 floats per vector. Compiled with -mavx512f -mavx512bw -mavx512vl
// and -ffp-contract=off (kernels/CMakeLists.txt); multiplies and adds stay separate instructions.
#include <immintrin.h>

#include "kernels/cpu/adam_simd_loop.h"
#include "kernels/cpu/bf16_round_avx512.h"

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

  // floatToBf16 on 16 lanes (bf16_round_avx512.h).
  static void storeBf16(uint16_t* at, Vec x) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(at), roundToBf16(x));
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
