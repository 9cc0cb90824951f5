// The CUDA backend of the accelerator interface (built only where CMake found nvcc: the
// ds_kernels_cuda library). Plain C++: kernels/accelerator.cc includes it without CUDA's headers.
#pragma once

#include <string>

#include "kernels/accelerator.h"

namespace ds::kernels::cuda {

// Why no GPU can be used, e.g. "cudaGetDeviceCount: CUDA driver version is insufficient for CUDA
// runtime version (cudaErrorInsufficientDriver)"; empty when one can. Asked once per process.
std::string unavailableReason();

// The backend; throws ds::Error with unavailableReason() when there is no GPU.
Accelerator& cudaAccelerator();

}  // namespace ds::kernels::cuda
