// SimdVec: the few intrinsics the hand-written vector kernels (CPU-Adam, the bf16 and fp16 reduce)
// are written against, for the instruction set the including file is compiled with (AVX-512 F/BW/VL
// or AVX2 with F16C: see kernels/CMakeLists.txt), so that each kernel's loop is written once, in
// its *_impl.h, and only the thin *_avx2.cc / *_avx512.cc files differ. Each float operation is
// one correctly rounded instruction, never fused into an FMA (-ffp-contract=off), so a loop over
// them in the scalar code's order gives its bits.
// Include only from those per-ISA files. Everything here has internal linkage: the linker keeps
// one copy of an inline function for the whole program, and it could pick the AVX-512 build of it
// for a caller on an AVX2 machine.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

namespace ds::kernels::detail {
namespace {

constexpr int kNearestEven = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)

struct SimdVec {
  using Vec = __m512;  // 16 fp32 lanes
  using Bits = __m512i;
  using Mask = __mmask16;
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
  static Vec max(Vec a, Vec b) { return _mm512_max_ps(a, b); }  // a > b ? a : b, NaNs included

  // Integer operations on the fp32 bit patterns (32-bit lanes).
  static Bits bitsOf(Vec x) { return _mm512_castps_si512(x); }
  static Bits set1Bits(int32_t x) { return _mm512_set1_epi32(x); }
  static Bits andBits(Bits a, Bits b) { return _mm512_and_si512(a, b); }
  static Bits orBits(Bits a, Bits b) { return _mm512_or_si512(a, b); }
  static Bits addBits(Bits a, Bits b) { return _mm512_add_epi32(a, b); }
  static Bits shiftRight16(Bits a) { return _mm512_srli_epi32(a, 16); }
  static Mask greater(Bits a, Bits b) { return _mm512_cmpgt_epi32_mask(a, b); }  // signed
  static Bits select(Mask m, Bits ifSet, Bits ifClear) {
    return _mm512_mask_blend_epi32(m, ifClear, ifSet);
  }

  // kWidth fp16 values: widened exactly (denormals included), narrowed to nearest even with NaNs
  // quieted and their top payload bits kept, as the scalar _Float16 conversions do.
  static Vec widenFp16(const uint16_t* at) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(at)));
  }
  static void narrowFp16(uint16_t* at, Vec x) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(at), _mm512_cvtps_ph(x, kNearestEven));
  }

  // bf16 widens by placing its 16 bits above 16 zero bits. A pair is 2 * kWidth values; lo holds
  // the first kWidth of them here.
  static void widenBf16Pair(const uint16_t* at, Vec& lo, Vec& hi) {
    lo = widenBf16(at);
    hi = widenBf16(at + kWidth);
  }
  // kWidth values, each the low 16 bits of a lane of `bits`.
  static void storeLow16(uint16_t* at, Bits bits) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(at), _mm512_cvtepi32_epi16(bits));
  }
  // The inverse of widenBf16Pair's lane order, on the low 16 bits of each lane.
  static void storeLow16Pair(uint16_t* at, Bits lo, Bits hi) {
    storeLow16(at, lo);
    storeLow16(at + kWidth, hi);
  }

 private:
  static Vec widenBf16(const uint16_t* at) {
    const __m256i half = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(half), 16));
  }
};

#elif defined(__AVX2__) && defined(__F16C__)

struct SimdVec {
  using Vec = __m256;  // 8 fp32 lanes
  using Bits = __m256i;
  using Mask = __m256i;  // all ones in a lane where true
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
  static Vec max(Vec a, Vec b) { return _mm256_max_ps(a, b); }  // a > b ? a : b, NaNs included

  static Bits bitsOf(Vec x) { return _mm256_castps_si256(x); }
  static Bits set1Bits(int32_t x) { return _mm256_set1_epi32(x); }
  static Bits andBits(Bits a, Bits b) { return _mm256_and_si256(a, b); }
  static Bits orBits(Bits a, Bits b) { return _mm256_or_si256(a, b); }
  static Bits addBits(Bits a, Bits b) { return _mm256_add_epi32(a, b); }
  static Bits shiftRight16(Bits a) { return _mm256_srli_epi32(a, 16); }
  static Mask greater(Bits a, Bits b) { return _mm256_cmpgt_epi32(a, b); }  // signed
  static Bits select(Mask m, Bits ifSet, Bits ifClear) {
    return _mm256_blendv_epi8(ifClear, ifSet, m);
  }

  static Vec widenFp16(const uint16_t* at) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(at)));
  }
  static void narrowFp16(uint16_t* at, Vec x) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(at), _mm256_cvtps_ph(x, kNearestEven));
  }

  // Interleaving with zeros widens values 0-3 and 8-11 (lo) and 4-7 and 12-15 (hi); packus of lo
  // and hi (storeLow16Pair) undoes exactly that order, so no lane permute is needed either way.
  static void widenBf16Pair(const uint16_t* at, Vec& lo, Vec& hi) {
    const Bits half = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at));
    lo = _mm256_castsi256_ps(_mm256_unpacklo_epi16(_mm256_setzero_si256(), half));
    hi = _mm256_castsi256_ps(_mm256_unpackhi_epi16(_mm256_setzero_si256(), half));
  }
  // packus saturates, which leaves values below 0x10000 as they are.
  static void storeLow16(uint16_t* at, Bits bits) {
    // packus works within 128-bit lanes: [r0..r3 r0..r3 | r4..r7 r4..r7]; take quadwords 0 and 2.
    const Bits packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(bits, bits), 0x08);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(at), _mm256_castsi256_si128(packed));
  }
  static void storeLow16Pair(uint16_t* at, Bits lo, Bits hi) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(at), _mm256_packus_epi32(lo, hi));
  }
};

#else
#error \
    "simd_vec.h: include it only from files built with -mavx512f -mavx512bw -mavx512vl or -mavx2 -mf16c"
#endif

using Vec = SimdVec::Vec;

// floatToBf16 (half_convert.h) on every lane: round to nearest even by adding 0x7fff plus the kept
// part's lowest bit; a NaN instead keeps its top bits with the quiet bit set, so that rounding
// cannot carry it into an infinity. The bf16 bits are left in the low 16 bits of each lane.
inline SimdVec::Bits roundToBf16Bits(Vec value) {
  using V = SimdVec;
  const V::Bits bits = V::bitsOf(value);
  const V::Bits high = V::shiftRight16(bits);
  const V::Bits lsb = V::andBits(high, V::set1Bits(1));
  const V::Bits rounded = V::shiftRight16(V::addBits(bits, V::addBits(lsb, V::set1Bits(0x7fff))));
  const V::Bits magnitude = V::andBits(bits, V::set1Bits(0x7fffffff));
  const V::Mask isNan = V::greater(magnitude, V::set1Bits(0x7f800000));
  const V::Bits quietNan = V::orBits(high, V::set1Bits(0x40));
  return V::select(isNan, quietNan, rounded);
}

// The two 16-bit formats as the kernels see them: a pair (2 * kWidth values, widenPair and
// narrowPair agreeing on which value sits in which lane) and a single vector in order (narrow).
struct Bf16Vec {
  static void widenPair(const uint16_t* at, Vec& lo, Vec& hi) {
    SimdVec::widenBf16Pair(at, lo, hi);
  }
  static void narrowPair(uint16_t* at, Vec lo, Vec hi) {
    SimdVec::storeLow16Pair(at, roundToBf16Bits(lo), roundToBf16Bits(hi));
  }
  static void narrow(uint16_t* at, Vec x) { SimdVec::storeLow16(at, roundToBf16Bits(x)); }
};

struct Fp16Vec {
  static void widenPair(const uint16_t* at, Vec& lo, Vec& hi) {
    lo = SimdVec::widenFp16(at);
    hi = SimdVec::widenFp16(at + SimdVec::kWidth);
  }
  static void narrowPair(uint16_t* at, Vec lo, Vec hi) {
    SimdVec::narrowFp16(at, lo);
    SimdVec::narrowFp16(at + SimdVec::kWidth, hi);
  }
  static void narrow(uint16_t* at, Vec x) { SimdVec::narrowFp16(at, x); }
};

}  // namespace
}  // namespace ds::kernels::detail
