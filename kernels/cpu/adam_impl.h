// The vector loop of CPU-Adam, written once against SimdVec (simd_vec.h) and compiled per
// instruction set by adam_avx2.cc and adam_avx512.cc, in adamUpdate's exact operation order:
// separate multiply and add (never FMA), correctly rounded sqrt and divide, so results are bitwise
// equal. Include only from those files. Everything here has internal linkage, and those files call
// no inline header functions: the linker keeps one copy of an inline function for the whole
// program, and it could pick the AVX-512 build of it for a caller on an AVX2 machine.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/adam_paths.h"
#include "kernels/cpu/simd_vec.h"

namespace ds::kernels::detail {
namespace {

// Updates [0, count - count % SimdVec::kWidth) and returns how many elements that was.
template <bool kDecoupled, HalfFormat kFormat>
size_t adamVectorLoop(float* params, const float* grads, float* m, float* v, size_t count,
                      const AdamStepConstants& c, uint16_t* half) {
  using V = SimdVec;
  const Vec beta1 = V::set1(c.beta1), beta2 = V::set1(c.beta2);
  const Vec oneMinusBeta1 = V::set1(c.oneMinusBeta1), oneMinusBeta2 = V::set1(c.oneMinusBeta2);
  const Vec eps = V::set1(c.eps), stepSize = V::set1(c.stepSize);
  const Vec invSqrtBc2 = V::set1(c.invSqrtBc2), weightDecay = V::set1(c.weightDecay);
  const Vec decayFactor = V::set1(c.decayFactor);
  size_t i = 0;
  for (; i + V::kWidth <= count; i += V::kWidth) {
    Vec g = V::load(grads + i);
    Vec p = V::load(params + i);
    if constexpr (kDecoupled) {
      p = V::mul(p, decayFactor);
    } else {
      g = V::add(g, V::mul(weightDecay, p));
    }
    const Vec mi = V::add(V::mul(beta1, V::load(m + i)), V::mul(oneMinusBeta1, g));
    // (oneMinusBeta2 * g) * g: the reference's left-to-right order.
    const Vec vi = V::add(V::mul(beta2, V::load(v + i)), V::mul(V::mul(oneMinusBeta2, g), g));
    const Vec denom = V::add(V::mul(V::sqrt(vi), invSqrtBc2), eps);
    p = V::sub(p, V::div(V::mul(stepSize, mi), denom));
    V::store(m + i, mi);
    V::store(v + i, vi);
    V::store(params + i, p);
    if constexpr (kFormat == HalfFormat::Bf16) Bf16Vec::narrow(half + i, p);
    if constexpr (kFormat == HalfFormat::Fp16) Fp16Vec::narrow(half + i, p);
  }
  return i;
}

template <bool kDecoupled>
size_t adamVectorLoop(float* params, const float* grads, float* m, float* v, size_t count,
                      const AdamStepConstants& c, uint16_t* half, HalfFormat format) {
  if (half == nullptr || format == HalfFormat::None)
    return adamVectorLoop<kDecoupled, HalfFormat::None>(params, grads, m, v, count, c, half);
  if (format == HalfFormat::Bf16)
    return adamVectorLoop<kDecoupled, HalfFormat::Bf16>(params, grads, m, v, count, c, half);
  return adamVectorLoop<kDecoupled, HalfFormat::Fp16>(params, grads, m, v, count, c, half);
}

// A scalar head up to a vector-aligned params address (aligned stores, no split cache lines on the
// array written most), the vector body, then a scalar tail.
void adamSimdPath(float* params, const float* grads, float* m, float* v, size_t count,
                  const AdamStepConstants& c, uint16_t* half, HalfFormat format) {
  constexpr uintptr_t kAlign = SimdVec::kAlignBytes;
  const uintptr_t address = reinterpret_cast<uintptr_t>(params);
  size_t head = 0;
  if (address % sizeof(float) == 0) head = ((kAlign - address % kAlign) % kAlign) / sizeof(float);
  if (head > count) head = count;
  auto halfAt = [&](size_t at) { return half == nullptr ? nullptr : half + at; };
  adamScalarPath(params, grads, m, v, head, c, half, format);
  const size_t body = c.decoupledDecay
                          ? adamVectorLoop<true>(params + head, grads + head, m + head, v + head,
                                                 count - head, c, halfAt(head), format)
                          : adamVectorLoop<false>(params + head, grads + head, m + head, v + head,
                                                  count - head, c, halfAt(head), format);
  const size_t done = head + body;
  adamScalarPath(params + done, grads + done, m + done, v + done, count - done, c, halfAt(done),
                 format);
}

}  // namespace
}  // namespace ds::kernels::detail
