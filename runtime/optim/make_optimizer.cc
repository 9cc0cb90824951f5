// makeOptimizer: see the header. AdamW is Adam with adam_w_mode forced on by the config parser.
#include "runtime/optim/make_optimizer.h"

#include <string>

#include "common/error.h"
#include "runtime/optim/adam.h"
#include "runtime/optim/lamb.h"
#include "runtime/optim/onebit_adam.h"
#include "runtime/optim/onebit_lamb.h"
#include "runtime/optim/sgd.h"
#include "runtime/optim/zero_one_adam.h"

namespace ds::runtime {
namespace {

// A hand-built config may pair a type with another type's params; say so instead of throwing
// std::bad_variant_access.
template <typename Params>
const Params& paramsOf(const OptimizerConfig& config, const char* want) {
  const Params* p = std::get_if<Params>(&config.params);
  if (!p) {
    throw Error(std::string("makeOptimizer: optimizer type ") + optimizerTypeName(config.type) +
                " needs " + want +
                " in OptimizerConfig::params; set them or use parseOptimizerConfig");
  }
  return *p;
}

}  // namespace

std::unique_ptr<Optimizer> makeOptimizer(const OptimizerConfig& config,
                                         const std::vector<ParamSpec>& specs, size_t begin,
                                         size_t end, kernels::Accelerator& acc) {
  switch (config.type) {
    case OptimizerType::Adam:
    case OptimizerType::AdamW:
      return std::make_unique<Adam>(paramsOf<AdamParams>(config, "AdamParams"), specs, begin, end,
                                    acc);
    case OptimizerType::Lamb:
      return std::make_unique<Lamb>(paramsOf<LambParams>(config, "LambParams"), specs, begin, end);
    case OptimizerType::SGD:
      return std::make_unique<Sgd>(paramsOf<SgdParams>(config, "SgdParams"), specs, begin, end);
    case OptimizerType::OneBitAdam:
      return std::make_unique<OneBitAdam>(paramsOf<OneBitAdamParams>(config, "OneBitAdamParams"),
                                          specs, begin, end);
    case OptimizerType::ZeroOneAdam:
      return std::make_unique<ZeroOneAdam>(paramsOf<ZeroOneAdamParams>(config, "ZeroOneAdamParams"),
                                           specs, begin, end);
    case OptimizerType::OneBitLamb:
      return std::make_unique<OneBitLamb>(paramsOf<OneBitLambParams>(config, "OneBitLambParams"),
                                          specs, begin, end);
  }
  return nullptr;
}


}  // namespace ds::runtime
