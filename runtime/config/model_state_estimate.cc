// estimateModelState: what the engine allocates per rank (see the header's formulas).
#include "runtime/config/model_state_estimate.h"

namespace ds::runtime {

ModelStateEstimate estimateModelState(int stage, DType modelType, DType gradType, double params,
                                      int world, double optimizerBytesPerParam) {
  const double shard = params / world;
  ModelStateEstimate e;
  e.parameters = dtypeBytes(modelType) * (stage == 3 ? shard : params);
  e.gradients = dtypeBytes(gradType) * (stage >= 2 ? shard : params);
  const bool masterIsWorking = modelType == DType::F32 && (stage == 0 || stage == 3);
  e.masterWeights = masterIsWorking ? 0.0 : 4.0 * (stage == 0 ? params : shard);
  e.optimizerStates = optimizerBytesPerParam * (stage == 0 ? params : shard);
  return e;
}

}  // namespace ds::runtime
