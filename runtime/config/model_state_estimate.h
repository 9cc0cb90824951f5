// The ZeRO model-state formulas this engine's allocations follow (checked against the engine's
// own accounting in test_engine.cc), per rank, for psi parameters on N ranks:
//   16-bit model (bf16/fp16), Adam (K = 12: fp32 master + two moments):
//     stage 0: 2+2+K psi   stage 1: 4 psi + K psi/N   stage 2: 2 psi + (2+K) psi/N   stage 3: (4+K)
//     psi/N
//   fp32 model: the master is the working copy at stages 0 and 3, a separate fp32 shard at 1-2:
//     stage 0: 8+S psi     stage 1: 8 psi + (4+S) psi/N   stage 2: 4 psi + (8+S) psi/N   stage 3:
//     (8+S) psi/N
// where S is the optimizer's state bytes per parameter (Adam 8, SGD with momentum 4, Lamb 8).
#pragma once

#include <cstdint>

#include "common/dtype.h"

namespace ds::runtime {

struct ModelStateEstimate {
  double parameters = 0, gradients = 0, masterWeights = 0, optimizerStates = 0;
  double total() const { return parameters + gradients + masterWeights + optimizerStates; }
};

// gradType: the gradient accumulation dtype (data_types.grad_accum_dtype, default modelType).
ModelStateEstimate estimateModelState(int stage, DType modelType, DType gradType, double params,
                                      int world, double optimizerBytesPerParam);

// offload_optimizer nvme: the bytes per element of a swap slot (runtime/offload/slot_swapper.h):
// the fp32 master slice where the master is a copy of its own, then the optimizer's state.
inline double swapSlotBytesPerElement(const ModelStateEstimate& e, double optimizerBytesPerParam) {
  return (e.masterWeights > 0 ? 4.0 : 0.0) + optimizerBytesPerParam;
}

}  // namespace ds::runtime
