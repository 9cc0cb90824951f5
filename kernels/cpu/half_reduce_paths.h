// The per-instruction-set bf16 and fp16 reduce paths half_reduce.cc dispatches to. Internal to
// ds_kernels. The vector paths do whole vectors only and return how many elements they did; the
// caller's scalar loop finishes the tail.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/half_convert.h"
#include "kernels/cpu/half_reduce.h"

namespace ds::kernels::detail {

// The reference every path must match bit for bit: one element, exactly as the vector lanes do it.
// Widen and Narrow are half_convert.h's scalar conversions of one format.
template <float (*Widen)(uint16_t), uint16_t (*Narrow)(float)>
inline uint16_t halfReduceOne(const uint16_t* const* inputs, int n, size_t i, HalfReduceOp op,
                              float scale) {
  float acc = Widen(inputs[0][i]);
  for (int k = 1; k < n; ++k) {
    const float next = Widen(inputs[k][i]);
    acc = op == HalfReduceOp::Max ? (acc < next ? next : acc) : acc + next;
  }
  if (op == HalfReduceOp::Avg) acc *= scale;
  return Narrow(acc);
}

// One instruction set's vector paths (half_reduce_impl.h): whole steps of vectors only; each
// returns how many elements it did.
struct HalfReducePaths {
  size_t (*bf16)(uint16_t* out, const uint16_t* const* inputs, int n, size_t count, HalfReduceOp op,
                 float scale);
  size_t (*fp16)(uint16_t* out, const uint16_t* const* inputs, int n, size_t count, HalfReduceOp op,
                 float scale);
};

// Only call these paths where kernelIsaSupported() says so (compiled with -mavx2, -mavx512*); the
// fp16 Avx2 path also needs F16C.
const HalfReducePaths& halfReducePathsAvx2();
const HalfReducePaths& halfReducePathsAvx512();

}  // namespace ds::kernels::detail
