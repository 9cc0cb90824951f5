// The transformer kernels compiled for one instruction set (see kernels/CMakeLists.txt for its
// flags); transformer_kernels.cc calls it only where the CPU has them.
#include "kernels/cpu/transformer_kernels_impl.h"

namespace ds::kernels::detail {

const TransformerKernels& transformerKernelsAvx512() { return kTable; }

}  // namespace ds::kernels::detail
