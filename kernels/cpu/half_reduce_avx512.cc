// The bf16 and fp16 reduce loop (half_reduce_impl.h) compiled for AVX-512 F/BW/VL: 32 values per
// step. half_reduce.cc calls it only where the CPU has these instruction sets.
#include "kernels/cpu/half_reduce_impl.h"

namespace ds::kernels::detail {

const HalfReducePaths& halfReducePathsAvx512() { return kHalfReducePaths; }

}  // namespace ds::kernels::detail
