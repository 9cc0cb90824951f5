// makeOptimizer: the optimizer the config names, over one rank's shard [begin, end) of the flat
// parameter buffer described by `specs` (offsets in the same coordinates as begin and end); its
// kernels run on `acc` (Adam's element loop; the others' loops are still plain host code).
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "kernels/accelerator.h"
#include "runtime/config/optimizer_config.h"
#include "runtime/model/model.h"
#include "runtime/optim/optimizer.h"

namespace ds::runtime {

std::unique_ptr<Optimizer> makeOptimizer(
    const OptimizerConfig& config, const std::vector<ParamSpec>& specs, size_t begin, size_t end,
    kernels::Accelerator& acc = kernels::accelerator(DeviceKind::Cpu));

}  // namespace ds::runtime
