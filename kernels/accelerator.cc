// Which backends this build and this machine have (the device's choice: common/device_kind.h).
// The backends themselves are kernels/cpu/cpu_accelerator.cc and kernels/cuda/cuda_accelerator.cc
// (built only with CUDA: DS_HAVE_CUDA_KERNELS).
#include "kernels/accelerator.h"

#include <cstdlib>
#include <string>

#include "common/error.h"
#include "kernels/cpu/cpu_accelerator.h"
#include "kernels/cpu/guarded_accelerator.h"
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

Accelerator& jobAccelerator(DeviceKind kind, int localRank) {
  if (const char* memory = std::getenv("DS_DEVICE_MEMORY"); memory && *memory) {
    if (std::string(memory) != "guarded")
      throw Error(std::string("DS_DEVICE_MEMORY: expected guarded (or unset), got \"") + memory +
                  "\"");
    if (kind == DeviceKind::Cpu) return guardedCpuAccelerator();
  }
  Accelerator& acc = accelerator(kind);
  if (kind != DeviceKind::Cpu) acc.setDevice(localRank % acc.deviceCount());
  return acc;
}

}  // namespace ds::kernels
