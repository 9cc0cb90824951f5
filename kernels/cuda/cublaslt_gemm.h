// The accelerator's GEMM on the GPU through cuBLASLt, in fp32 (pure fp32 maths: no TF32) and bf16
// (fp32 accumulation, fp32 or bf16 output). libcublasLt is loaded with dlopen on the first GEMM:
// linking it would add ~100 ms to the start of every program that links the kernels (measured
// here), GPU job or not.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "kernels/accelerator.h"

namespace ds::kernels::cuda {

// accelerator.h's gemm contract (row-major) on `stream`, through a per-stream workspace.
void cublasLtGemm(size_t m, size_t n, size_t k, float alpha, const GemmInput& a, const GemmInput& b,
                  float beta, const GemmOutput& c, cudaStream_t stream);

// Frees the workspace of a stream about to be destroyed (after its work finished).
void forgetGemmStream(cudaStream_t stream) noexcept;

}  // namespace ds::kernels::cuda
