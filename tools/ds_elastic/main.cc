// ds-elastic: DeepSpeed's ds_elastic. Prints the elastic batch of a DeepSpeed config: the final
// (global) batch size and the GPU counts that can run it, and with a world size the micro-batch
// size and gradient accumulation steps for it.
//   ds-elastic -c CONFIG [-w WORLD_SIZE] [--json]
// Version 0.2 without -w takes the world size from $WORLD_SIZE, as DeepSpeed does. Invalid input,
// a world size the config cannot run, or an elasticity block that differs from
// $DEEPSPEED_ELASTICITY_CONFIG (which DeepSpeed's runtime refuses) exits 2 with the reason on
// stderr and nothing on stdout.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "common/command_line.h"
#include "common/error.h"
#include "common/guarded_main.h"
#include "common/files.h"
#include "common/json_text.h"
#include "runtime/config/ds_config.h"
#include "runtime/elastic/elastic_batch.h"

namespace {

struct Options {
  std::string config;
  int64_t worldSize = 0;
  bool json = false;
};

int run(const Options& o) {
  const std::string text = ds::readWholeFile(o.config, "DeepSpeed config", size_t{16} << 20);
  const ds::runtime::ElasticityConfig config = ds::runtime::readElasticityConfig(text, o.config);
  // The block a job's ranks would refuse, refused here too.
  ds::runtime::checkSchedulerElasticConfig(config, o.config);
  // Everything is computed before anything is printed: a failure leaves stdout empty.
  const ds::runtime::ElasticBatch e =
      ds::runtime::computeElasticBatch(config, o.worldSize, std::getenv("WORLD_SIZE"));
  const std::string valid = ds::runtime::pythonList(e.validGpus);
  if (o.json) {
    std::printf("{\"final_batch_size\": %lld, \"valid_gpus\": %s", static_cast<long long>(e.finalBatchSize),
                valid.c_str());
    if (e.microBatchSize)
      std::printf(", \"micro_batch_size\": %lld, \"gradient_accumulation_steps\": %lld",
                  static_cast<long long>(*e.microBatchSize),
                  static_cast<long long>(*e.gradientAccumulationSteps));
    std::printf("}\n");
    return 0;
  }
  const auto block = ds::parseJsonText(text, o.config)["elasticity"];  // valid: read above
  const char* rule = "------------------------------------------";
  std::printf("%s\nElasticity config:\n%s\n%s\n%s\n", rule, rule, block.dump(4).c_str(), rule);
  if (o.worldSize > 0)
    std::printf("Calculated results for world size %lld:\n", static_cast<long long>(o.worldSize));
  else
    std::printf("Calculated results:\n");
  std::printf("%s\nfinal_batch_size .... %lld\nvalid_gpus .......... %s\n", rule,
              static_cast<long long>(e.finalBatchSize), valid.c_str());
  if (e.microBatchSize)
    std::printf("micro_batch_size .... %lld\ngradient_accumulation_steps .... %lld\n",
                static_cast<long long>(*e.microBatchSize),
                static_cast<long long>(*e.gradientAccumulationSteps));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return ds::guardedMain("ds-elastic", [&] {
    CLI::App app{"ds-elastic: the elastic batch size and valid GPU counts of a DeepSpeed config"};
    Options o;
    app.add_option("-c,--config", o.config, "DeepSpeed config JSON with an elasticity block")
        ->required();
    app.add_option("-w,--world-size,--world_size", o.worldSize,
                   "intended/current world size (0: none; v0.2 then reads $WORLD_SIZE)")
        ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
    app.add_flag("--json", o.json, "one JSON object instead of text");
    if (std::optional<int> status = ds::parseCommandLine(app, argc, argv)) return *status;
    return run(o);
  });
}
