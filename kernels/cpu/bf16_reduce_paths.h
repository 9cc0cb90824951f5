// The per-instruction-set bf16 reduce paths bf16_reduce.cc dispatches to. Internal to ds_kernels.
// The vector paths do whole vectors only and return how many elements they did; the caller's
// scalar loop finishes the tail.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/bf16_reduce.h"
#include "kernels/cpu/half_convert.h"

namespace ds::kernels::detail {

// The reference every path must match bit for bit: one element, exactly as the vector lanes do it.
inline uint16_t bf16ReduceOne(const uint16_t* const* inputs, int n, size_t i, Bf16ReduceOp op,
                              float scale) {
  float acc = bf16ToFloat(inputs[0][i]);
  for (int k = 1; k < n; ++k) {
    const float next = bf16ToFloat(inputs[k][i]);
    acc = op == Bf16ReduceOp::Max ? (acc < next ? next : acc) : acc + next;
  }
  if (op == Bf16ReduceOp::Avg) acc *= scale;
  return floatToBf16(acc);
}

// Only call these where kernelIsaSupported() says so (compiled with -mavx2, -mavx512*).
size_t bf16ReduceAvx2(uint16_t* out, const uint16_t* const* inputs, int n, size_t count,
                      Bf16ReduceOp op, float scale);
size_t bf16ReduceAvx512(uint16_t* out, const uint16_t* const* inputs, int n, size_t count,
                        Bf16ReduceOp op, float scale);

}  // namespace ds::kernels::detail
