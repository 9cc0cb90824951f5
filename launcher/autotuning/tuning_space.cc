// tuningSpace and the experiment configs: see the header.
#include "launcher/autotuning/tuning_space.h"

#include <algorithm>
#include <cstdio>

#include "common/error.h"
#include "runtime/config/auto_value.h"

namespace ds::launcher {
namespace {

using Json = nlohmann::ordered_json;

// The GPT's micro-batch has two spellings in a NeoX config; DeepSpeed's wins where both are.
constexpr const char* kMicro = "train_micro_batch_size_per_gpu";
constexpr const char* kNeoxMicro = "batch-size";
constexpr const char* kAccumulation = "gradient_accumulation_steps";
constexpr const char* kTrainBatch = "train_batch_size";

const Json* member(const Json& object, const char* key) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(key);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

// A key's values for the tuner: a whole number pins it, a list of them gives the choices, "auto"
// (and "all") or absent leaves them to the tuner (empty). Anything else is an error naming it.
std::vector<int64_t> pinnedValues(const Json* v, const std::string& path) {
  if (!v || runtime::isAutoValue(*v) || (v->is_string() && v->get<std::string>() == "all"))
    return {};
  auto whole = [&](const Json& x) {
    if (x.is_number_integer() && x.get<int64_t>() >= 0) return x.get<int64_t>();
    if (x.is_number_float() && x.get<double>() >= 0 && x.get<double>() < 9e18 &&
        x.get<double>() == static_cast<double>(static_cast<int64_t>(x.get<double>())))
      return static_cast<int64_t>(x.get<double>());
    throw Error(path +
                ": expected a whole number, a list of them, or \"auto\" for the "
                "autotuner to choose, got " +
                x.dump());
  };
  if (!v->is_array()) return {whole(*v)};
  std::vector<int64_t> out;
  for (const Json& x : *v) out.push_back(whole(x));
  if (out.empty()) throw Error(path + ": an empty list leaves nothing to try");
  return out;
}

std::vector<int64_t> divisorsIn(int64_t n, int64_t lo, int64_t hi) {
  std::vector<int64_t> out;
  for (int64_t d = 1; d <= n; ++d)
    if (n % d == 0 && d >= lo && d <= hi) out.push_back(d);
  return out;
}

std::vector<int64_t> powersOfTwoIn(int64_t lo, int64_t hi) {
  std::vector<int64_t> out;
  for (int64_t p = 1; p <= hi; p *= 2)
    if (p >= lo) out.push_back(p);
  return out;
}

// The batch choices of one data-parallel size: (micro, accumulation, fixed global batch).
struct BatchChoice {
  int64_t micro, accumulation;
  std::optional<int64_t> trainBatch;
};

std::vector<BatchChoice> batchChoices(const Json& config, const runtime::AutotuningConfig& a,
                                      int64_t dataRanks) {
  const Json* micro = member(config, kMicro) ? member(config, kMicro) : member(config, kNeoxMicro);
  const std::vector<int64_t> micros = pinnedValues(micro, kMicro);
  const std::vector<int64_t> accumulations =
      pinnedValues(member(config, kAccumulation), kAccumulation);
  const std::vector<int64_t> trainBatches = pinnedValues(member(config, kTrainBatch), kTrainBatch);
  if (accumulations.size() > 1 || trainBatches.size() > 1)
    throw Error(std::string(kAccumulation) + " and " + kTrainBatch +
                ": expected one value or \"auto\" (the micro-batch takes a list)");
  std::vector<BatchChoice> out;
  if (!trainBatches.empty()) {  // the global batch is fixed: micro x accumulation keep it
    const int64_t t = trainBatches[0];
    if (t % dataRanks != 0) return out;
    const int64_t perRank = t / dataRanks;
    for (int64_t m :
         micros.empty() ? divisorsIn(perRank, a.minMicroBatch, a.maxMicroBatch) : micros)
      if (m > 0 && perRank % m == 0 && (accumulations.empty() || accumulations[0] * m == perRank))
        out.push_back({m, perRank / m, t});
    return out;
  }
  for (int64_t m : micros.empty() ? powersOfTwoIn(a.minMicroBatch, a.maxMicroBatch) : micros) {
    if (m <= 0) continue;
    int64_t accumulation = 1;
    if (!accumulations.empty()) {
      accumulation = accumulations[0];
    } else if (a.maxTrainBatchSize) {  // DeepSpeed: gas = max_train_batch_size_per_gpu // mbs
      const int64_t perRank = *a.maxTrainBatchSize / dataRanks;
      if (m > perRank) continue;
      accumulation = perRank / m;
    }
    if (accumulation > 0) out.push_back({m, accumulation, std::nullopt});
  }
  return out;
}

std::vector<int> stagesOf(const Json& config) {
  const Json* zero = member(config, "zero_optimization");
  const std::vector<int64_t> given =
      pinnedValues(zero ? member(*zero, "stage") : nullptr, "zero_optimization.stage");
  if (given.empty()) return {0, 1, 2, 3};
  std::vector<int> out;
  for (int64_t s : given) {
    if (s > 3) throw Error("zero_optimization.stage: expected 0-3, got " + std::to_string(s));
    out.push_back(static_cast<int>(s));
  }
  return out;
}

bool offloadsToNvme(const Json& config, const char* block) {
  const Json* zero = member(config, "zero_optimization");
  if (const Json* o = zero ? member(*zero, block) : nullptr)
    if (const Json* d = member(*o, "device"); d && d->is_string() && *d == "nvme") return true;
  return false;
}

// `choice` once for each of `values` of one of its fields.
template <typename T>
std::vector<TuningChoice> variants(const TuningChoice& choice, const std::vector<T>& values,
                                   T TuningChoice::*field) {
  std::vector<TuningChoice> out;
  for (const T& value : values) {
    out.push_back(choice);
    out.back().*field = value;
  }
  return out;
}

// Every choice of `list` replaced, in place, by its variants: one dimension of the space at a
// time, in the order nested loops over the dimensions would give.
template <typename Variants>
void expand(std::vector<TuningChoice>& list, const Variants& variantsOf) {
  std::vector<TuningChoice> out;
  for (const TuningChoice& c : list)
    for (TuningChoice& v : variantsOf(c)) out.push_back(std::move(v));
  list = std::move(out);
}

// Whether each choice swaps to NVMe: the config's offload, unless switched off, where the stage
// takes it.
std::vector<TuningChoice> withOffload(std::vector<TuningChoice> list, const Json& config) {
  const bool optimizer = offloadsToNvme(config, "offload_optimizer");
  const bool params = offloadsToNvme(config, "offload_param");
  for (TuningChoice& c : list) {
    c.optimizerOffload = !c.offloadOff && c.stage >= 1 && optimizer;
    c.paramOffload = !c.offloadOff && c.stage == 3 && params;
  }
  return list;
}

// The GPT's pipe x model layouts: the config's when it sets them, else every pair that divides
// the world, the layers (pipe) and the heads (model).
std::vector<std::pair<int, int>> layoutsOf(const Json& config, const TuningJobShape& shape,
                                           bool tune) {
  const std::vector<int64_t> pipes =
      pinnedValues(member(config, "pipe-parallel-size"), "pipe-parallel-size");
  const std::vector<int64_t> models =
      pinnedValues(member(config, "model-parallel-size"), "model-parallel-size");
  std::vector<std::pair<int, int>> out;
  for (int pipe = 1; pipe <= shape.world; ++pipe)
    for (int model = 1; pipe * model <= shape.world; ++model) {
      const bool pipeOk =
          pipes.empty() ? (tune || pipe == 1) : std::count(pipes.begin(), pipes.end(), pipe) > 0;
      const bool modelOk = models.empty() ? (tune || model == 1)
                                          : std::count(models.begin(), models.end(), model) > 0;
      if (!pipeOk || !modelOk || shape.world % (pipe * model) != 0) continue;
      if (shape.layers > 0 && pipe > shape.layers) continue;
      if (shape.heads > 0 && shape.heads % model != 0) continue;
      out.emplace_back(pipe, model);
    }
  return out;
}

void write(Json& config, const TuningChoice& c) {
  config.erase(kNeoxMicro);
  config[kMicro] = c.micro;
  config[kAccumulation] = c.accumulation;
  if (c.trainBatch)
    config[kTrainBatch] = *c.trainBatch;
  else
    config.erase(kTrainBatch);
  Json& zero = config["zero_optimization"];
  if (!zero.is_object()) zero = Json::object();
  zero["stage"] = c.stage;
  if (c.overlapComm) zero["overlap_comm"] = *c.overlapComm;
  if (c.reduceBucket) {  // the gathers' buckets with the reductions'
    zero["reduce_bucket_size"] = *c.reduceBucket;
    zero["allgather_bucket_size"] = *c.reduceBucket;
  }
  if (c.offloadOff) {
    zero.erase("offload_optimizer");
    zero.erase("offload_param");
  }
  // Offload where the stage takes it (DeepSpeed's rules): optimizer from 1, parameters at 3.
  if (c.stage == 0) zero.erase("offload_optimizer");
  if (c.stage != 3) zero.erase("offload_param");
  if (c.checkpointActivations) config["checkpoint-activations"] = *c.checkpointActivations;
  if (c.layoutTuned) {
    config["pipe-parallel-size"] = c.pipe;
    config["model-parallel-size"] = c.model;
  }
  // The other keys the tuner chooses, where "auto" is left: the config's defaults.
  for (const char* key : {"overlap_comm", "reduce_bucket_size", "allgather_bucket_size"})
    if (zero.contains(key) && runtime::isAutoValue(zero[key])) zero.erase(key);
  for (const char* key : {"checkpoint-activations", "pipe-parallel-size", "model-parallel-size"})
    if (config.contains(key) && runtime::isAutoValue(config[key])) config.erase(key);
}

}  // namespace

std::string TuningChoice::name() const {
  std::string n = "z" + std::to_string(stage) + "_gas" + std::to_string(accumulation) + "_tmbspg" +
                  std::to_string(micro);
  if (overlapComm) n += *overlapComm ? "_oc1" : "_oc0";
  if (reduceBucket) n += "_rbs" + std::to_string(*reduceBucket);
  if (checkpointActivations) n += *checkpointActivations ? "_ac1" : "_ac0";
  if (layoutTuned) n += "_pp" + std::to_string(pipe) + "_mp" + std::to_string(model);
  if (offloadOff) n += "_nooffload";
  return n;
}

std::string TuningChoice::describe() const {
  std::string d = "ZeRO " + std::to_string(stage) + ", micro " + std::to_string(micro) + " x " +
                  std::to_string(accumulation);
  if (overlapComm) d += *overlapComm ? ", overlap" : ", no overlap";
  if (reduceBucket) d += ", bucket " + std::to_string(*reduceBucket);
  if (checkpointActivations && *checkpointActivations) d += ", recompute";
  if (layoutTuned) d += ", pipe " + std::to_string(pipe) + " x model " + std::to_string(model);
  if (offloadOff) d += ", no offload";
  return d;
}

std::vector<TuningChoice> tuningSpace(const Json& config,
                                      const runtime::AutotuningConfig& autotuning,
                                      const TuningJobShape& shape) {
  const bool full = !autotuning.fast;
  const std::vector<std::pair<int, int>> layouts =
      shape.gpt ? layoutsOf(config, shape, full) : std::vector<std::pair<int, int>>{{1, 1}};
  std::vector<TuningChoice> out;
  for (int stage : stagesOf(config))
    for (const auto& [pipe, model] : layouts)
      for (const BatchChoice& b : batchChoices(config, autotuning, shape.world / (pipe * model))) {
        TuningChoice c;
        c.stage = stage;
        c.micro = b.micro;
        c.accumulation = b.accumulation;
        c.trainBatch = b.trainBatch;
        c.pipe = pipe;
        c.model = model;
        c.layoutTuned = shape.gpt && full && layouts.size() > 1;
        out.push_back(c);
      }
  if (!full) return withOffload(out, config);

  const std::vector<std::optional<bool>> onOff = {false, true};
  expand(out, [&](const TuningChoice& c) {
    return c.stage >= 2 ? variants(c, onOff, &TuningChoice::overlapComm)
                        : std::vector<TuningChoice>{c};
  });
  // Buckets: the config's, and one that splits the model into about four reductions (on a small
  // model DeepSpeed's 5e8 default is one bucket, with nothing to overlap).
  const std::vector<std::optional<int64_t>> buckets = {
      std::nullopt, std::max<int64_t>(1, static_cast<int64_t>(shape.parameters / 4))};
  expand(out, [&](const TuningChoice& c) {
    return c.stage >= 1 && shape.parameters > 0 ? variants(c, buckets, &TuningChoice::reduceBucket)
                                                : std::vector<TuningChoice>{c};
  });
  const Json* ac = member(config, "checkpoint-activations");
  if (shape.gpt && (!ac || runtime::isAutoValue(*ac)))
    expand(out, [&](const TuningChoice& c) {
      return variants(c, onOff, &TuningChoice::checkpointActivations);
    });
  if (offloadsToNvme(config, "offload_optimizer") || offloadsToNvme(config, "offload_param"))
    expand(out, [&](const TuningChoice& c) {
      return variants(c, std::vector<bool>{false, true}, &TuningChoice::offloadOff);
    });
  return withOffload(out, config);
}

Json experimentConfig(const Json& config, const TuningChoice& choice,
                      const std::string& metricPath) {
  Json out = tunedConfig(config, choice);
  // An experiment is timed, not watched: the monitors would write its few steps where the real
  // run's logs go, and the profiler would print into the timed steps.
  for (const char* block : {"tensorboard", "csv_monitor", "wandb", "flops_profiler"})
    if (out.contains(block) && out[block].is_object()) out[block]["enabled"] = false;
  out.erase("tensorboard-dir");
  Json block = config.contains("autotuning") ? config["autotuning"] : Json::object();
  block["enabled"] = true;
  block["metric_path"] = metricPath;
  out["autotuning"] = block;
  return out;
}

Json tunedConfig(const Json& config, const TuningChoice& choice) {
  Json out = config;
  write(out, choice);
  out.erase("autotuning");
  return out;
}

Json firstChoiceConfig(const Json& config, const runtime::AutotuningConfig& autotuning,
                       const TuningJobShape& shape) {
  const std::vector<TuningChoice> space = tuningSpace(config, autotuning, shape);
  if (space.empty())
    throw Error("autotuning: no micro-batch size between " +
                std::to_string(autotuning.minMicroBatch) + " and " +
                std::to_string(autotuning.maxMicroBatch) + " divides the batch over the " +
                std::to_string(shape.world) + " ranks; change train_batch_size or the bounds");
  Json out = config;
  write(out, space.front());
  return out;
}

}  // namespace ds::launcher
