// bf16Reduce's dispatch and scalar path: the vector paths take whole vectors, the scalar loop the
// rest (or everything on Scalar).
#include "kernels/cpu/bf16_reduce.h"

#include "common/error.h"
#include "kernels/cpu/bf16_reduce_paths.h"

namespace ds::kernels {

void bf16Reduce(uint16_t* out, const uint16_t* const* inputs, int n, size_t count, Bf16ReduceOp op,
                float scale, KernelIsa isa) {
  if (n < 1 || count == 0) return;
  if (!kernelIsaSupported(isa))
    throw Error(std::string("bf16Reduce: this CPU has no ") + kernelIsaName(isa));
  size_t done = 0;
  if (isa == KernelIsa::Avx512)
    done = detail::bf16ReduceAvx512(out, inputs, n, count, op, scale);
  else if (isa == KernelIsa::Avx2)
    done = detail::bf16ReduceAvx2(out, inputs, n, count, op, scale);
  for (size_t i = done; i < count; ++i) out[i] = detail::bf16ReduceOne(inputs, n, i, op, scale);
}

void bf16Reduce(uint16_t* out, const uint16_t* const* inputs, int n, size_t count, Bf16ReduceOp op,
                float scale) {
  bf16Reduce(out, inputs, n, count, op, scale, bestKernelIsa());
}

}  // namespace ds::kernels
