// The arithmetic of every reducing collective, on any dtype: combine several input arrays element
// by element in a fixed input order, so every caller that combines the same inputs gets the same
// bits. Halves are combined in fp32 and rounded once.
#pragma once

#include <cstddef>

#include "runtime/comm/communicator.h"

namespace ds::runtime {

// out[i] = op(inputs[0][i], ..., inputs[n-1][i]); Avg divides the sum by `ranks` (the group size,
// which differs from n when a reduction is split in stages). `out` may be inputs[0].
void reduceElements(void* out, const void* const* inputs, int n, size_t count, DType dtype,
                    ReduceOp op, int ranks);

// data[i] *= factor, in place.
void scaleElements(void* data, size_t count, DType dtype, float factor);

// Converts between a dtype's array and fp32 (a plain copy for fp32).
void toFloat(const void* in, float* out, size_t count, DType dtype);
void fromFloat(const float* in, void* out, size_t count, DType dtype);

}  // namespace ds::runtime
