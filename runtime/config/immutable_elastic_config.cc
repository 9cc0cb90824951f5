// Parses "elasticity". DeepSpeed checks types only loosely (Python); here every key has its type,
// and the value rules are DeepSpeed's, in its order. Errors name the key path.
#include "runtime/config/immutable_elastic_config.h"

#include <cstdio>
#include <cstdlib>
#include <limits>

#include "common/error.h"
#include "common/json_text.h"
#include "runtime/config/config_blocks.h"

namespace ds::runtime {
namespace {

const char* kBlock = "elasticity";
const std::vector<std::string_view> kKeys = {"enabled",
                                             "max_train_batch_size",
                                             "micro_batch_sizes",
                                             "min_gpus",
                                             "max_gpus",
                                             "min_time",
                                             "version",
                                             "prefer_larger_batch",
                                             "ignore_non_elastic_batch_info",
                                             "num_gpus_per_node",
                                             "model_parallel_size"};

double readVersion(const JsonReader& r, const Json& v) {
  const std::string path = "elasticity.version";
  double version = 0;
  if (v.is_string()) {  // DeepSpeed applies float() to it, so "0.1" works there too
    const std::string text = v.get<std::string>();
    if (text == "0.1" || text == "0.2") return std::stod(text);
    r.fail(path, "expected 0.1 or 0.2, got " + describeJson(v));
  }
  version = r.number(v, path);
  if (version > 0.2)
    r.fail(path, "elasticity version " + describeJson(v) +
                     " is newer than this runtime supports "
                     "(up to 0.2)");
  if (version != 0.1 && version != 0.2)
    r.fail(path, "no elasticity algorithm for version " + describeJson(v) + "; use 0.1 or 0.2");
  return version;
}

// As Python prints them: [2, 4] and 0.1.
std::string pythonList(const std::vector<int64_t>& values) {
  std::string text = "[";
  for (size_t i = 0; i < values.size(); ++i) text += (i ? ", " : "") + std::to_string(values[i]);
  return text + "]";
}

std::string pythonFloat(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);  // versions are 0.1 or 0.2
  return text;
}

}  // namespace

ElasticityConfig parseElasticityConfig(JsonReader& r, const Json& block) {
  r.object(block, kBlock);
  r.warnUnknownKeys(block, kBlock, kKeys);
  ElasticityConfig c;
  r.readBool(block, kBlock, "enabled", c.enabled);
  if (c.enabled && !JsonReader::member(block, "max_train_batch_size"))
    r.fail("elasticity.max_train_batch_size", "missing (required when elasticity is enabled)");
  if (c.enabled && !JsonReader::member(block, "micro_batch_sizes"))
    r.fail("elasticity.micro_batch_sizes", "missing (required when elasticity is enabled)");
  // "seqlen" and other placeholders of the reference's example are refused here.
  r.readInt(block, kBlock, "max_train_batch_size", c.maxTrainBatchSize, 1);
  if (const Json* v = JsonReader::member(block, "micro_batch_sizes")) {
    if (!v->is_array())
      r.fail("elasticity.micro_batch_sizes",
             "expected a list of micro batch sizes, got " + describeJson(*v));
    if (v->empty())
      r.fail("elasticity.micro_batch_sizes", "expected at least one micro batch size");
    // DeepSpeed first requires every element to be an int (2.0 is refused), then every one to be
    // positive, so [0, 2.0] fails on the type of 2.0.
    c.microBatchSizes.clear();
    auto pathOf = [](size_t i) {
      return "elasticity.micro_batch_sizes[" + std::to_string(i) + "]";
    };
    for (size_t i = 0; i < v->size(); ++i)
      c.microBatchSizes.push_back(r.exactInteger((*v)[i], pathOf(i)));
    for (size_t i = 0; i < v->size(); ++i)
      if (c.microBatchSizes[i] <= 0)
        r.fail(pathOf(i), "expected a positive integer, got " + describeJson((*v)[i]));
  }
  r.readInt(block, kBlock, "min_gpus", c.minGpus, std::numeric_limits<int64_t>::min());
  r.readInt(block, kBlock, "max_gpus", c.maxGpus, std::numeric_limits<int64_t>::min());
  if (c.minGpus < 1 || c.maxGpus < 1)
    r.fail("elasticity.min_gpus", "min_gpus and max_gpus must be > 0, given min_gpus " +
                                      std::to_string(c.minGpus) + ", max_gpus " +
                                      std::to_string(c.maxGpus));
  if (c.maxGpus < c.minGpus)
    r.fail("elasticity.min_gpus", "min_gpus " + std::to_string(c.minGpus) +
                                      " is greater than max_gpus " + std::to_string(c.maxGpus));
  r.readInt(block, kBlock, "model_parallel_size", c.modelParallelSize, 1);
  r.readInt(block, kBlock, "num_gpus_per_node", c.numGpusPerNode, 1);
  r.readInt(block, kBlock, "min_time", c.minTime, 0);
  if (const Json* v = JsonReader::member(block, "version")) c.version = readVersion(r, *v);
  if (c.modelParallelSize > 1 && c.version != 0.2)
    r.fail("elasticity.model_parallel_size",
           "elasticity version 0.1 does not support model parallelism (model_parallel_size " +
               std::to_string(c.modelParallelSize) + "); use version 0.2");
  r.readBool(block, kBlock, "prefer_larger_batch", c.preferLargerBatch);
  r.readBool(block, kBlock, "ignore_non_elastic_batch_info", c.ignoreNonElasticBatchInfo);
  return c;
}

void ensureImmutableElasticConfig(std::string_view schedulerJson, const ElasticityConfig& runtime,
                                  const std::string& source) {
  const Json block = parseOrderedJsonText(schedulerJson, kElasticityConfigVariable);
  std::vector<std::string> warnings;  // unknown keys: DeepSpeed ignores them here too
  JsonReader r(kElasticityConfigVariable, warnings);
  const ElasticityConfig scheduler = parseElasticityConfig(r, block);
  // DeepSpeed's own test puts a whole config in the variable; its keys then take their defaults.
  const std::string fix =
      JsonReader::member(block, "elasticity")
          ? "; the variable holds a whole config: set it to the config's elasticity block alone"
          : "; the config changed after the job was scheduled: restore it, or relaunch the job "
            "so that the scheduler sees this one";
  auto refuse = [&](const char* key, const char* field, const std::string& seen,
                    const std::string& given) {
    throw Error(source + ": elasticity." + key + ": elastic config '" + field + "=" + seen +
                "' seen by the resource scheduler (" + kElasticityConfigVariable +
                ") does not match " + field + "=" + given + " in the config passed to the runtime" +
                fix);
  };
  // DeepSpeed's order and field names.
  if (scheduler.maxTrainBatchSize != runtime.maxTrainBatchSize)
    refuse("max_train_batch_size", "max_acceptable_batch_size",
           std::to_string(scheduler.maxTrainBatchSize), std::to_string(runtime.maxTrainBatchSize));
  if (scheduler.microBatchSizes != runtime.microBatchSizes)
    refuse("micro_batch_sizes", "micro_batches", pythonList(scheduler.microBatchSizes),
           pythonList(runtime.microBatchSizes));
  if (scheduler.version != runtime.version)
    refuse("version", "version", pythonFloat(scheduler.version), pythonFloat(runtime.version));
}

void checkSchedulerElasticConfig(const ElasticityConfig& config, const std::string& source) {
  if (!config.enabled) return;
  if (const char* seen = std::getenv(kElasticityConfigVariable))
    ensureImmutableElasticConfig(seen, config, source);
}

}  // namespace ds::runtime
