// Run-time choice among the transformer kernel builds: the widest instruction set the CPU has,
// unless DS_KERNEL_ISA (scalar, avx2, avx512) asks for a narrower one.
#include "kernels/cpu/transformer_kernels.h"

#include <cstdlib>
#include <string>

#include "common/error.h"

namespace ds::kernels {
namespace detail {
const TransformerKernels& transformerKernelsScalar();
const TransformerKernels& transformerKernelsAvx2();
const TransformerKernels& transformerKernelsAvx512();
}  // namespace detail

const char* kernelIsaName(KernelIsa isa) {
  switch (isa) {
    case KernelIsa::Avx512:
      return "avx512";
    case KernelIsa::Avx2:
      return "avx2";
    case KernelIsa::Scalar:
      break;
  }
  return "scalar";
}

bool kernelIsaSupported(KernelIsa isa) {
  switch (isa) {
    case KernelIsa::Scalar:
      return true;
    case KernelIsa::Avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case KernelIsa::Avx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl");
  }
  return false;
}

KernelIsa bestKernelIsa() {
  static const KernelIsa best = [] {
    KernelIsa widest = kernelIsaSupported(KernelIsa::Avx512) ? KernelIsa::Avx512
                       : kernelIsaSupported(KernelIsa::Avx2) ? KernelIsa::Avx2
                                                             : KernelIsa::Scalar;
    const char* asked = std::getenv("DS_KERNEL_ISA");
    if (!asked || !*asked) return widest;
    for (KernelIsa isa : {KernelIsa::Scalar, KernelIsa::Avx2, KernelIsa::Avx512})
      if (std::string(asked) == kernelIsaName(isa)) {
        if (!kernelIsaSupported(isa))
          throw Error(std::string("DS_KERNEL_ISA=") + asked + ": this CPU lacks it; use " +
                      kernelIsaName(widest) + " or narrower");
        return isa;
      }
    throw Error(std::string("DS_KERNEL_ISA=") + asked + ": expected scalar, avx2 or avx512");
  }();
  return best;
}

const TransformerKernels& transformerKernels(KernelIsa isa) {
  if (!kernelIsaSupported(isa))
    throw Error(std::string("transformer kernels: this CPU has no ") + kernelIsaName(isa));
  switch (isa) {
    case KernelIsa::Avx512:
      return detail::transformerKernelsAvx512();
    case KernelIsa::Avx2:
      return detail::transformerKernelsAvx2();
    case KernelIsa::Scalar:
      break;
  }
  return detail::transformerKernelsScalar();
}

}  // namespace ds::kernels
