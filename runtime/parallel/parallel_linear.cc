// The two sliced linears: local matrix products plus the one all-reduce each direction needs.
#include "runtime/parallel/parallel_linear.h"

namespace ds::runtime {
namespace {

void addBias(const LinearShape& s, const float* bias, float* y) {
  if (!bias) return;
  for (size_t r = 0; r < s.rows; ++r)
    for (size_t o = 0; o < s.out; ++o) y[r * s.out + o] += bias[o];
}

// The local half of both backwards: dW += dY^T x, db += column sums of dY, dx = dY W.
void localBackward(kernels::Accelerator& acc, const LinearShape& s, const float* x,
                   const float* weight, const float* dy, float* dweight, float* dbias, float* dx) {
  if (s.rows > 0)
    kernels::gemmF32(acc, true, false, s.out, s.in, s.rows, 1.0f, dy, s.out, x, s.in, 1.0f, dweight,
                     s.in);
  if (dbias)
    for (size_t r = 0; r < s.rows; ++r)
      for (size_t o = 0; o < s.out; ++o) dbias[o] += dy[r * s.out + o];
  kernels::gemmF32(acc, false, false, s.rows, s.in, s.out, 1.0f, dy, s.out, weight, s.in, 0.0f, dx,
                   s.in);
}

}  // namespace

void columnParallelForward(kernels::Accelerator& acc, const LinearShape& s, const float* x,
                           const float* weight, const float* bias, float* y) {
  kernels::gemmF32(acc, false, true, s.rows, s.out, s.in, 1.0f, x, s.in, weight, s.in, 0.0f, y,
                   s.out);
  addBias(s, bias, y);
}

void columnParallelBackward(kernels::Accelerator& acc, Communicator& model, const LinearShape& s,
                            const float* x, const float* weight, const float* dy, float* dweight,
                            float* dbias, float* dx) {
  localBackward(acc, s, x, weight, dy, dweight, dbias, dx);
  // Each rank's dx is its outputs' share of the gradient of the input they all read.
  model.allReduce(dx, s.rows * s.in);
}

void rowParallelForward(kernels::Accelerator& acc, Communicator& model, const LinearShape& s,
                        const float* x, const float* weight, const float* bias, float* y) {
  kernels::gemmF32(acc, false, true, s.rows, s.out, s.in, 1.0f, x, s.in, weight, s.in, 0.0f, y,
                   s.out);
  model.allReduce(y, s.rows * s.out);
  // After the sum, or the bias would be counted once per model rank.
  addBias(s, bias, y);
}

void rowParallelBackward(kernels::Accelerator& acc, const LinearShape& s, const float* x,
                         const float* weight, const float* dy, float* dweight, float* dbias,
                         float* dx) {
  localBackward(acc, s, x, weight, dy, dweight, dbias, dx);
}

}  // namespace ds::runtime
