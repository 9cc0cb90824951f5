// ds-config check: parse the whole config as ds-launch would for a given world size and print the
// resolved batch trio (train_batch_size = micro x accumulation x ranks).
#include <iostream>
#include <memory>
#include <string>

#include "runtime/config/ds_config.h"
#include "tools/ds_config/commands.h"

namespace ds::tools {
namespace {

struct CheckOptions {
  std::string config;
  int64_t worldSize = 1;
  bool json = false;
};

void runCheck(const CheckOptions& o) {
  const runtime::DeepSpeedConfig c = runtime::loadDeepSpeedConfig(o.config, o.worldSize);
  for (const std::string& warning : c.warnings) std::cerr << "warning: " << warning << '\n';
  const runtime::BatchConfig& b = c.batch;
  if (o.json) {
    std::cout << "{\"world_size\": " << o.worldSize
              << ", \"train_batch_size\": " << b.trainBatchSize
              << ", \"train_micro_batch_size_per_gpu\": " << b.microBatchPerGpu
              << ", \"gradient_accumulation_steps\": " << b.gradientAccumulationSteps << "}\n";
    return;
  }
  std::cout << o.config << ": OK (world size " << o.worldSize << "): train_batch_size "
            << b.trainBatchSize << " = micro " << b.microBatchPerGpu << " x accumulation "
            << b.gradientAccumulationSteps << " x " << o.worldSize
            << (o.worldSize == 1 ? " rank" : " ranks") << '\n';
}

}  // namespace

void addCheckCommand(CLI::App& app) {
  auto o = std::make_shared<CheckOptions>();
  CLI::App* cmd = app.add_subcommand(
      "check", "Validate CONFIG and print the resolved batch sizes; warnings go to stderr");
  cmd->add_option("config", o->config, "DeepSpeed JSON config")->required();
  cmd->add_option("--world-size", o->worldSize, "data-parallel ranks the batch is split over")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  cmd->add_flag("--json", o->json, "print one JSON object instead of a sentence");
  cmd->callback([o] { runCheck(*o); });
}

}  // namespace ds::tools
