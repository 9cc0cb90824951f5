// Megatron's ColumnParallelLinear (gather_output=False) and RowParallelLinear
// (input_is_parallel=True) over the model-parallel group: forward and backward on one rank's
// slice (tensor_slicing.h), with Megatron's conjugate operators f (identity forward, all-reduce
// backward) and g (all-reduce forward, identity backward). Buffers are the caller's, on `acc`'s
// device; the products run there (the bias loops still run on the host: CPU backend only).
#pragma once

#include <cstddef>

#include "kernels/accelerator.h"
#include "runtime/comm/communicator.h"

namespace ds::runtime {

// Shapes, row-major: x [rows, in], weight [out, in] (y = x W^T + b), y [rows, out], where for a
// column-parallel linear `out` is the rank's share of the outputs and for a row-parallel one `in`
// is its share of the inputs.
struct LinearShape {
  size_t rows = 0;
  size_t in = 0;
  size_t out = 0;
};

// Column-parallel: x is the full input, the same on every model rank (f's forward is the
// identity); y is this rank's chunk of the outputs. bias may be null.
void columnParallelForward(kernels::Accelerator& acc, const LinearShape& shape, const float* x,
                           const float* weight, const float* bias, float* y);
// dW += dY^T x and db += sum of dY's rows (accumulated, as the model's gradients are); dx is
// overwritten with the full input gradient: dY W summed over the model ranks (f's backward).
void columnParallelBackward(kernels::Accelerator& acc, Communicator& model,
                            const LinearShape& shape, const float* x, const float* weight,
                            const float* dy, float* dweight, float* dbias, float* dx);

// Row-parallel: x is this rank's chunk of the input features (a column-parallel output); y is the
// full output, all-reduced over the model ranks (g), then the replicated bias (may be null) is
// added once.
void rowParallelForward(kernels::Accelerator& acc, Communicator& model, const LinearShape& shape,
                        const float* x, const float* weight, const float* bias, float* y);
// dY is the full output gradient, the same on every rank (g's backward is the identity), so the
// bias gradient is too; dx (this rank's input chunk) is overwritten; no communication.
void rowParallelBackward(kernels::Accelerator& acc, const LinearShape& shape, const float* x,
                         const float* weight, const float* dy, float* dweight, float* dbias,
                         float* dx);

}  // namespace ds::runtime
