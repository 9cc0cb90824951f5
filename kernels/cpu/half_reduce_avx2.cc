// The bf16 and fp16 reduce loop (half_reduce_impl.h) compiled for AVX2 with F16C: 16 values per
// step. half_reduce.cc calls the fp16 path only where the CPU has F16C; the bf16 path widens and
// rounds with integer instructions, with no fp16 conversion that could use it.
#include "kernels/cpu/half_reduce_impl.h"

namespace ds::kernels::detail {

const HalfReducePaths& halfReducePathsAvx2() { return kHalfReducePaths; }

}  // namespace ds::kernels::detail
