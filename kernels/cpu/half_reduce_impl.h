// bf16Reduce's and fp16Reduce's vector loop, written once against SimdVec (simd_vec.h) and
// compiled per instruction set by half_reduce_avx2.cc and half_reduce_avx512.cc, which export
// kHalfReducePaths under their own names. Two vectors (2 * SimdVec::kWidth values) per step,
// combined left to right in fp32 exactly as halfReduceOne (half_reduce_paths.h) does one element;
// whole steps only, the caller finishes the tail. Include only from those files (internal linkage
// throughout: see simd_vec.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/half_reduce_paths.h"
#include "kernels/cpu/simd_vec.h"

namespace ds::kernels::detail {
namespace {

// std::max(acc, next) lane by lane: max returns its first operand only if it is greater, which is
// (acc < next ? next : acc) for NaNs and signed zeros too.
inline Vec combine(Vec acc, Vec next, HalfReduceOp op) {
  return op == HalfReduceOp::Max ? SimdVec::max(next, acc) : SimdVec::add(acc, next);
}

// Half is Bf16Vec or Fp16Vec (simd_vec.h). Returns how many elements it did.
template <class Half>
size_t halfReduceVectors(uint16_t* out, const uint16_t* const* inputs, int n, size_t count,
                         HalfReduceOp op, float scale) {
  constexpr size_t kStep = 2 * SimdVec::kWidth;
  const Vec factor = SimdVec::set1(scale);
  size_t i = 0;
  for (; i + kStep <= count; i += kStep) {
    Vec lo, hi;
    Half::widenPair(inputs[0] + i, lo, hi);
    for (int k = 1; k < n; ++k) {
      Vec nextLo, nextHi;
      Half::widenPair(inputs[k] + i, nextLo, nextHi);
      lo = combine(lo, nextLo, op);
      hi = combine(hi, nextHi, op);
    }
    if (op == HalfReduceOp::Avg) {
      lo = SimdVec::mul(lo, factor);
      hi = SimdVec::mul(hi, factor);
    }
    // Stored only after every input is read: out may be one of them.
    Half::narrowPair(out + i, lo, hi);
  }
  return i;
}

constexpr HalfReducePaths kHalfReducePaths = {halfReduceVectors<Bf16Vec>,
                                              halfReduceVectors<Fp16Vec>};

}  // namespace
}  // namespace ds::kernels::detail
