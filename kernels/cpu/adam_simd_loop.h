// The vector loop of CPU-Adam, written once over an "Ops" struct of intrinsics (Avx2Ops in
// adam_avx2.cc, Avx512Ops in adam_avx512.cc), in adamUpdate's exact operation order: separate
// multiply and add (never FMA), correctly rounded sqrt and divide, so results are bitwise equal.
// Include only from the per-ISA files. Everything here has internal linkage, and those files call
// no inline header functions: the linker keeps one copy of an inline function for the whole
// program, and it could pick the AVX-512 build of it for a caller on an AVX2 machine.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/adam_paths.h"

namespace ds::kernels::detail {
namespace {

// Updates [0, count - count % Ops::kWidth) and returns how many elements that was.
template <class Ops, bool kDecoupled, HalfFormat kFormat>
size_t adamVectorLoop(float* params, const float* grads, float* m, float* v, size_t count,
                      const AdamStepConstants& c, uint16_t* half) {
  using Vec = typename Ops::Vec;
  const Vec beta1 = Ops::set1(c.beta1), beta2 = Ops::set1(c.beta2);
  const Vec oneMinusBeta1 = Ops::set1(c.oneMinusBeta1), oneMinusBeta2 = Ops::set1(c.oneMinusBeta2);
  const Vec eps = Ops::set1(c.eps), stepSize = Ops::set1(c.stepSize);
  const Vec invSqrtBc2 = Ops::set1(c.invSqrtBc2), weightDecay = Ops::set1(c.weightDecay);
  const Vec decayFactor = Ops::set1(c.decayFactor);
  size_t i = 0;
  for (; i + Ops::kWidth <= count; i += Ops::kWidth) {
    Vec g = Ops::load(grads + i);
    Vec p = Ops::load(params + i);
    if constexpr (kDecoupled) {
      p = Ops::mul(p, decayFactor);
    } else {
      g = Ops::add(g, Ops::mul(weightDecay, p));
    }
    const Vec mi = Ops::add(Ops::mul(beta1, Ops::load(m + i)), Ops::mul(oneMinusBeta1, g));
    // (oneMinusBeta2 * g) * g: the reference's left-to-right order.
    const Vec vi =
        Ops::add(Ops::mul(beta2, Ops::load(v + i)), Ops::mul(Ops::mul(oneMinusBeta2, g), g));
    const Vec denom = Ops::add(Ops::mul(Ops::sqrt(vi), invSqrtBc2), eps);
    p = Ops::sub(p, Ops::div(Ops::mul(stepSize, mi), denom));
    Ops::store(m + i, mi);
    Ops::store(v + i, vi);
    Ops::store(params + i, p);
    if constexpr (kFormat == HalfFormat::Bf16) Ops::storeBf16(half + i, p);
    if constexpr (kFormat == HalfFormat::Fp16) Ops::storeFp16(half + i, p);
  }
  return i;
}

template <class Ops, bool kDecoupled>
size_t adamVectorLoop(float* params, const float* grads, float* m, float* v, size_t count,
                      const AdamStepConstants& c, uint16_t* half, HalfFormat format) {
  if (half == nullptr || format == HalfFormat::None)
    return adamVectorLoop<Ops, kDecoupled, HalfFormat::None>(params, grads, m, v, count, c, half);
  if (format == HalfFormat::Bf16)
    return adamVectorLoop<Ops, kDecoupled, HalfFormat::Bf16>(params, grads, m, v, count, c, half);
  return adamVectorLoop<Ops, kDecoupled, HalfFormat::Fp16>(params, grads, m, v, count, c, half);
}

// A scalar head up to a vector-aligned params address (aligned stores, no split cache lines on the
// array written most), the vector body, then a scalar tail.
template <class Ops>
void adamSimdPath(float* params, const float* grads, float* m, float* v, size_t count,
                  const AdamStepConstants& c, uint16_t* half, HalfFormat format) {
  const uintptr_t address = reinterpret_cast<uintptr_t>(params);
  size_t head = 0;
  if (address % sizeof(float) == 0)
    head = ((Ops::kAlignBytes - address % Ops::kAlignBytes) % Ops::kAlignBytes) / sizeof(float);
  if (head > count) head = count;
  auto halfAt = [&](size_t at) { return half == nullptr ? nullptr : half + at; };
  adamScalarPath(params, grads, m, v, head, c, half, format);
  const size_t body =
      c.decoupledDecay ? adamVectorLoop<Ops, true>(params + head, grads + head, m + head, v + head,
                                                   count - head, c, halfAt(head), format)
                       : adamVectorLoop<Ops, false>(params + head, grads + head, m + head, v + head,
                                                    count - head, c, halfAt(head), format);
  const size_t done = head + body;
  adamScalarPath(params + done, grads + done, m + done, v + done, count - done, c, halfAt(done),
                 format);
}

}  // namespace
}  // namespace ds::kernels::detail
