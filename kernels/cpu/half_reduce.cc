// bf16Reduce's and fp16Reduce's dispatch and scalar paths: the vector paths take whole vectors, the
// scalar loop the rest (or everything on Scalar).
#include "kernels/cpu/half_reduce.h"

#include "common/error.h"
#include "kernels/cpu/half_reduce_paths.h"

namespace ds::kernels {
namespace {

using VectorPath = size_t (*)(uint16_t*, const uint16_t* const*, int, size_t, HalfReduceOp, float);
using ScalarPath = uint16_t (*)(const uint16_t* const*, int, size_t, HalfReduceOp, float);

void halfReduce(const char* name, VectorPath avx2, VectorPath avx512, ScalarPath one, uint16_t* out,
                const uint16_t* const* inputs, int n, size_t count, HalfReduceOp op, float scale,
                KernelIsa isa) {
  if (n < 1 || count == 0) return;
  if (!kernelIsaSupported(isa))
    throw Error(std::string(name) + ": this CPU has no " + kernelIsaName(isa));
  size_t done = 0;
  if (isa == KernelIsa::Avx512)
    done = avx512(out, inputs, n, count, op, scale);
  else if (isa == KernelIsa::Avx2 && avx2 != nullptr)
    done = avx2(out, inputs, n, count, op, scale);
  for (size_t i = done; i < count; ++i) out[i] = one(inputs, n, i, op, scale);
}

}  // namespace

void bf16Reduce(uint16_t* out, const uint16_t* const* inputs, int n, size_t count, HalfReduceOp op,
                float scale, KernelIsa isa) {
  halfReduce("bf16Reduce", detail::halfReducePathsAvx2().bf16, detail::halfReducePathsAvx512().bf16,
             detail::halfReduceOne<bf16ToFloat, floatToBf16>, out, inputs, n, count, op, scale,
             isa);
}

void fp16Reduce(uint16_t* out, const uint16_t* const* inputs, int n, size_t count, HalfReduceOp op,
                float scale, KernelIsa isa) {
  // Every AVX2 CPU made has F16C, but the instruction sets are separate: checked, not assumed.
  static const bool f16c = __builtin_cpu_supports("f16c");
  halfReduce("fp16Reduce", f16c ? detail::halfReducePathsAvx2().fp16 : nullptr,
             detail::halfReducePathsAvx512().fp16, detail::halfReduceOne<fp16ToFloat, floatToFp16>,
             out, inputs, n, count, op, scale, isa);
}

void bf16Reduce(uint16_t* out, const uint16_t* const* inputs, int n, size_t count, HalfReduceOp op,
                float scale) {
  bf16Reduce(out, inputs, n, count, op, scale, bestKernelIsa());
}

void fp16Reduce(uint16_t* out, const uint16_t* const* inputs, int n, size_t count, HalfReduceOp op,
                float scale) {
  fp16Reduce(out, inputs, n, count, op, scale, bestKernelIsa());
}

}  // namespace ds::kernels
