// Which backends this build and this machine have (the device's choice: common/device_kind.h).
// The backends themselves are kernels/cpu/cpu_accelerator.cc and kernels/cuda/cuda_accelerator.cc
// (built only with CUDA: DS_HAVE_CUDA_KERNELS).
#include "kernels/accelerator.h"

#include "common/error.h"
#include "kernels/cpu/cpu_accelerator.h"
#if defined(DS_HAVE_CUDA_KERNELS)
#include "kernels/cuda/cuda_accelerator.h"
#endif

namespace ds::kernels {

bool acceleratorAvailable(DeviceKind kind, std::string* why) {
  std::string reason;
  if (kind == DeviceKind::Cuda) {
#if defined(DS_HAVE_CUDA_KERNELS)
    const std::string missing = cuda::unavailableReason();
    if (!missing.empty()) reason = "device cuda: no GPU visible: " + missing;
#else
    reason =
        "device cuda: this build has no CUDA backend (CMake found no nvcc, or -DDS_CUDA=OFF); "
        "rebuild where the CUDA toolkit is installed, or use device cpu";
#endif
  }
  if (why) *why = reason;
  return reason.empty();
}

Accelerator& accelerator(DeviceKind kind) {
  std::string why;
  if (!acceleratorAvailable(kind, &why)) throw Error(why);
#if defined(DS_HAVE_CUDA_KERNELS)
  if (kind == DeviceKind::Cuda) return cuda::cudaAccelerator();
#endif
  return cpuAccelerator();
}

}  // namespace ds::kernels
