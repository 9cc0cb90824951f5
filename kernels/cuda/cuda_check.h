// DS_CUDA_CHECK: a failed CUDA runtime call becomes a ds::Error naming the source line, the call
// and CUDA's own name for the error. Kernel launches are followed by DS_CUDA_CHECK_LAUNCH().
#pragma once

#include <cuda_runtime_api.h>

namespace ds::kernels::cuda {

[[noreturn]] void throwCudaError(cudaError_t status, const char* call, const char* file, int line);

}  // namespace ds::kernels::cuda

#define DS_CUDA_CHECK(call)                                                         \
  do {                                                                              \
    const cudaError_t dsCudaStatus = (call);                                        \
    if (dsCudaStatus != cudaSuccess)                                                \
      ::ds::kernels::cuda::throwCudaError(dsCudaStatus, #call, __FILE__, __LINE__); \
  } while (0)

#define DS_CUDA_CHECK_LAUNCH() DS_CUDA_CHECK(cudaGetLastError())
