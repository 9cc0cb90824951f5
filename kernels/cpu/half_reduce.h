// The element-wise combine of bf16 or fp16 arrays that every reducing collective runs: widen to
// fp32, sum (or max) in input order, optionally scale, round to nearest even once. One fused pass
// per vector, so the conversions cost no extra trip through memory. Does not handle fp32.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/transformer_kernels.h"

namespace ds::kernels {

// Avg is the sum multiplied by `scale` before rounding; Sum and Max ignore `scale`.
enum class HalfReduceOp { Sum, Avg, Max };

// out[i] = round(op(inputs[0][i], ..., inputs[n-1][i])), combined left to right in fp32 (Max as
// std::max(acc, next), so a NaN already in acc stays and a later one is skipped). Every path gives
// the scalar one's bits. n >= 1; out may be any of the inputs, but no other overlap.
void bf16Reduce(uint16_t* out, const uint16_t* const* inputs, int n, size_t count, HalfReduceOp op,
                float scale, KernelIsa isa);
// The same for IEEE fp16. Its Avx2 path also needs F16C; a CPU without it runs the scalar loop.
void fp16Reduce(uint16_t* out, const uint16_t* const* inputs, int n, size_t count, HalfReduceOp op,
                float scale, KernelIsa isa);

// The widest path DS_KERNEL_ISA allows (bestKernelIsa()).
void bf16Reduce(uint16_t* out, const uint16_t* const* inputs, int n, size_t count, HalfReduceOp op,
                float scale);
void fp16Reduce(uint16_t* out, const uint16_t* const* inputs, int n, size_t count, HalfReduceOp op,
                float scale);

}  // namespace ds::kernels
