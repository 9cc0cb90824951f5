// The autotuner's parts without processes: the autotuning block's keys (DeepSpeed's defaults,
// types, ranges, unknown keys), "auto" refused where no tuner fills it, the space (what a fixed
// global batch, max_train_batch_size, pinned keys and fast: false make of it), the experiment and
// winner configs, and the tuners' orders and stopping rules against a known cost surface.
#include <catch2/catch.hpp>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "common/error.h"
#include "launcher/autotuning/tuner.h"
#include "launcher/autotuning/tuning_cost_model.h"
#include "launcher/autotuning/tuning_space.h"
#include "runtime/config/ds_config.h"

using namespace ds;
using namespace ds::launcher;
using Json = nlohmann::ordered_json;

namespace {

runtime::AutotuningConfig block(const std::string& json) {
  return runtime::readAutotuningBlock(json, "cfg.json");
}

std::string errorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::set<std::string> names(const std::vector<TuningChoice>& space) {
  std::set<std::string> out;
  for (const TuningChoice& c : space) out.insert(c.name());
  return out;
}

}  // namespace

TEST_CASE("autotuning block: DeepSpeed's defaults, and every key checked by name") {
  const runtime::AutotuningConfig d = block("{}");
  CHECK_FALSE(d.enabled);
  CHECK(d.fast);
  CHECK(d.overwrite);
  CHECK(d.resultsDir == "autotuning_results");
  CHECK(d.expsDir == "autotuning_exps");
  CHECK(d.startProfileStep == 3);
  CHECK(d.endProfileStep == 5);
  CHECK(d.metric == runtime::TuningMetric::Throughput);
  CHECK(d.tunerType == runtime::TunerType::GridSearch);
  CHECK(d.tunerEarlyStopping == 5);
  CHECK(d.tunerNumTrials == 50);
  CHECK(d.maxMicroBatch == 1024);
  CHECK(d.minMicroBatch == 1);
  CHECK(d.numTuningMicroBatchSizes == 3);
  CHECK_FALSE(d.maxTrainBatchSize);

  const runtime::AutotuningConfig a = block(
      R"({"enabled": true, "fast": false, "metric": "latency", "tuner_type": "model_based",
          "max_train_batch_size": 4096, "arg_mappings": {"train_micro_batch_size_per_gpu":
          "--per_device_train_batch_size", "gradient_accumulation_steps ": " --gas "},
          "model_info": {"num_params": 1.5e9}})");
  CHECK(a.metric == runtime::TuningMetric::Latency);
  CHECK(a.tunerType == runtime::TunerType::ModelBased);
  CHECK(a.maxTrainBatchSize == 4096);
  REQUIRE(a.argMappings.size() == 2);
  // Trimmed, as DeepSpeed trims them (its own examples have "gradient_accumulation_steps ").
  CHECK(a.argMappings[1].first == "gradient_accumulation_steps");
  CHECK(a.argMappings[1].second == "--gas");
  CHECK(a.modelParameters == 1.5e9);

  CHECK_THAT(errorOf([] { block(R"({"fast": 1})"); }),
             Catch::Contains("autotuning.fast: expected true or false"));
  CHECK_THAT(errorOf([] { block(R"({"tuner_type": "xgboost"})"); }),
             Catch::Contains("autotuning.tuner_type: expected one of \"gridsearch\""));
  CHECK_THAT(errorOf([] { block(R"({"metric": "FLOPS"})"); }),
             Catch::Contains("autotuning.metric"));
  CHECK_THAT(errorOf([] { block(R"({"start_profile_step": 5, "end_profile_step": 5})"); }),
             Catch::Contains("autotuning.end_profile_step: expected a step after"));
  CHECK_THAT(errorOf([] { block(R"({"tuner_num_trials": 0})"); }),
             Catch::Contains("autotuning.tuner_num_trials"));
  CHECK_THAT(errorOf([] {
               block(R"({"min_train_micro_batch_size_per_gpu": 8,
                         "max_train_micro_batch_size_per_gpu": 4})");
             }),
             Catch::Contains("min_train_micro_batch_size_per_gpu: expected at most"));
  CHECK_THAT(errorOf([] { block(R"({"arg_mappings": {"optimizer": "--lr"}})"); }),
             Catch::Contains("the autotuner does not choose \"optimizer\""));
  CHECK_THAT(errorOf([] { block(R"({"results_dir": ""})"); }),
             Catch::Contains("autotuning.results_dir: expected a path"));
  // An unknown key is a warning with a suggestion, as everywhere in the config.
  const runtime::DeepSpeedConfig c = runtime::parseDeepSpeedConfig(
      R"({"train_batch_size": 8, "autotuning": {"enabled": true, "tuner_typ": "random"}})", 1,
      "cfg.json");
  REQUIRE(c.warnings.size() == 1);
  CHECK_THAT(c.warnings[0], Catch::Contains("autotuning.tuner_typ") &&
                                Catch::Contains("did you mean \"autotuning.tuner_type\""));
  CHECK(c.autotuning.enabled);
}

TEST_CASE("auto values without an autotuner are refused, saying who fills them in") {
  const std::string tuned = errorOf([] {
    runtime::parseDeepSpeedConfig(R"({"train_micro_batch_size_per_gpu": "auto"})", 1, "c.json");
  });
  CHECK_THAT(tuned, Catch::Contains("c.json: train_micro_batch_size_per_gpu: \"auto\" is for an "
                                    "autotuner to choose: run ds-launch --autotuning"));
  const std::string trainer = errorOf([] {
    runtime::parseDeepSpeedConfig(
        R"({"train_batch_size": 8, "optimizer": {"type": "AdamW", "params": {"lr": "auto"}}})", 1,
        "c.json");
  });
  CHECK_THAT(trainer, Catch::Contains("optimizer.params.lr: \"auto\" is a value Hugging Face's "
                                      "Trainer fills in") &&
                          Catch::Contains("set a value here"));
  // A string key whose own values include "auto" keeps its meaning.
  CHECK_NOTHROW(runtime::parseDeepSpeedConfig(R"({"train_batch_size": 8, "comm_backend": "auto"})",
                                              1, "c.json"));
}

TEST_CASE("tuning space: a fixed global batch keeps micro x accumulation x ranks") {
  const Json config = Json::parse(
      R"({"train_batch_size": 16, "train_micro_batch_size_per_gpu": "auto",
          "zero_optimization": {"stage": "auto"}})");
  TuningJobShape shape;
  shape.world = 4;
  const auto space = tuningSpace(config, block("{}"), shape);
  // Per rank 4 samples: micro 1, 2, 4 at each of the four stages.
  CHECK(space.size() == 12);
  for (const TuningChoice& c : space) {
    CHECK(c.micro * c.accumulation * 4 == 16);
    CHECK(c.trainBatch == 16);
  }
  CHECK(names(space).count("z3_gas1_tmbspg4") == 1);
  CHECK(space.front().name() == "z0_gas4_tmbspg1");  // DeepSpeed's grid order: stage, then micro

  // A pinned stage and micro-batch: nothing left to tune but what they allow.
  const Json pinned = Json::parse(
      R"({"train_batch_size": 16, "train_micro_batch_size_per_gpu": 2,
          "zero_optimization": {"stage": 1}})");
  const auto one = tuningSpace(pinned, block("{}"), shape);
  REQUIRE(one.size() == 1);
  CHECK(one[0].name() == "z1_gas2_tmbspg2");
  // A list of stages and micro-batches, as DeepSpeed takes them.
  const Json lists = Json::parse(
      R"({"train_batch_size": 16, "train_micro_batch_size_per_gpu": [1, 4],
          "zero_optimization": {"stage": [1, 3]}})");
  CHECK(names(tuningSpace(lists, block("{}"), shape)) ==
        std::set<std::string>{"z1_gas4_tmbspg1", "z1_gas1_tmbspg4", "z3_gas4_tmbspg1",
                              "z3_gas1_tmbspg4"});
  CHECK_THAT(errorOf([&] {
               tuningSpace(Json::parse(R"({"zero_optimization": {"stage": 4}})"), block("{}"),
                           shape);
             }),
             Catch::Contains("zero_optimization.stage: expected 0-3"));
}

TEST_CASE("tuning space: a free batch follows max_train_batch_size as DeepSpeed's does") {
  const Json config = Json::parse(R"({"train_micro_batch_size_per_gpu": "auto"})");
  TuningJobShape shape;
  shape.world = 2;
  const auto space = tuningSpace(
      config, block(R"({"max_train_batch_size": 64, "max_train_micro_batch_size_per_gpu": 64})"),
      shape);
  // Micro-batches 1..32 (64 per rank would need 128 in all), gas = 32 // micro.
  std::set<int64_t> micros;
  for (const TuningChoice& c : space) {
    micros.insert(c.micro);
    CHECK(c.accumulation == 32 / c.micro);
    CHECK_FALSE(c.trainBatch);
  }
  CHECK(micros == std::set<int64_t>{1, 2, 4, 8, 16, 32});
  // Without max_train_batch_size: powers of two from min to max, no accumulation.
  const auto free = tuningSpace(config, block(R"({"min_train_micro_batch_size_per_gpu": 2,
                "max_train_micro_batch_size_per_gpu": 8})"),
                                shape);
  CHECK(names(free).count("z0_gas1_tmbspg2") == 1);
  CHECK(names(free).count("z3_gas1_tmbspg8") == 1);
  CHECK(free.size() == 12);
}

TEST_CASE("tuning space: fast false adds overlap, buckets, recomputation and GPT layouts") {
  const Json config = Json::parse(
      R"({"train_batch_size": 8, "train_micro_batch_size_per_gpu": 1,
          "num-layers": 4, "zero_optimization": {"stage": "all"}})");
  TuningJobShape shape;
  shape.world = 4;
  shape.gpt = true;
  shape.layers = 4;
  shape.heads = 4;
  shape.parameters = 4e6;
  const auto fast = tuningSpace(config, block("{}"), shape);
  CHECK(fast.size() == 4);  // one micro-batch, four stages
  const auto full = tuningSpace(config, block(R"({"fast": false})"), shape);
  std::set<std::pair<int, int>> layouts;
  bool overlap = false, bucket = false, recompute = false;
  for (const TuningChoice& c : full) {
    layouts.insert({c.pipe, c.model});
    overlap = overlap || (c.overlapComm && *c.overlapComm);
    bucket = bucket || c.reduceBucket == 1000000;
    recompute = recompute || (c.checkpointActivations && *c.checkpointActivations);
    CHECK(c.micro * c.accumulation * (4 / (c.pipe * c.model)) == 8);
    if (c.stage < 2) CHECK_FALSE(c.overlapComm);
    if (c.stage == 0) CHECK_FALSE(c.reduceBucket);
  }
  CHECK(overlap);
  CHECK(bucket);
  CHECK(recompute);
  // Every pipe x model that divides 4 ranks, 4 layers and 4 heads.
  CHECK(layouts == std::set<std::pair<int, int>>{{1, 1}, {1, 2}, {1, 4}, {2, 1}, {2, 2}, {4, 1}});
}

TEST_CASE("experiment and winner configs: the choice written in, the metric file or no block") {
  const Json config = Json::parse(
      R"({"num-layers": 2, "batch-size": "auto", "train_batch_size": 8,
          "zero_optimization": {"stage": "auto", "offload_param": {"device": "nvme",
          "nvme_path": "swap"}}, "autotuning": {"enabled": true, "fast": true},
          "tensorboard": {"enabled": true, "output_path": "tb"}})");
  TuningChoice c;
  c.stage = 1;
  c.micro = 2;
  c.accumulation = 2;
  c.trainBatch = 8;
  const Json e = experimentConfig(config, c, "/r/z1/metrics.json");
  CHECK_FALSE(e.contains("batch-size"));  // NeoX's spelling gives way to DeepSpeed's
  CHECK(e["train_micro_batch_size_per_gpu"] == 2);
  CHECK(e["gradient_accumulation_steps"] == 2);
  CHECK(e["train_batch_size"] == 8);
  CHECK(e["zero_optimization"]["stage"] == 1);
  CHECK_FALSE(e["zero_optimization"].contains("offload_param"));  // stage 3 only
  CHECK(e["autotuning"]["metric_path"] == "/r/z1/metrics.json");
  CHECK(e["autotuning"]["fast"] == true);
  CHECK(e["tensorboard"]["enabled"] == false);  // an experiment writes no monitor logs
  const Json w = tunedConfig(config, c);
  CHECK_FALSE(w.contains("autotuning"));
  CHECK(w["tensorboard"]["enabled"] == true);
  CHECK(w["num-layers"] == 2);
  // What ds-config check --autotuning checks: the first choice, with the block kept.
  TuningJobShape shape;
  shape.world = 2;
  const Json first = firstChoiceConfig(config, block("{}"), shape);
  CHECK(first["zero_optimization"]["stage"] == 0);
  CHECK(first["train_micro_batch_size_per_gpu"] == 1);
  CHECK(first.contains("autotuning"));
}

namespace {

// A known cost surface: step time = features . truth, the metric samples / time.
struct Surface {
  std::vector<TunerCandidate> candidates;
  std::vector<double> throughput;
  size_t best = 0;
};

Surface surface() {
  Surface s;
  const CostFeatures truth = {1 / 4e9, 1 / 2e8, 4e-3, 1 / 1e8, 0};
  ModelFacts facts;
  facts.parameters = 3e6;
  facts.flopsPerSample = 6 * 3e6 * 128;
  facts.tokensPerSample = 128;
  TuningJobShape shape;
  shape.world = 4;
  const auto space = tuningSpace(
      Json::parse(R"({"train_batch_size": 64, "train_micro_batch_size_per_gpu": "auto"})"),
      block("{}"), shape);
  for (const TuningChoice& c : space) {
    TunerCandidate t;
    t.features = costFeatures(c, facts, 4);
    t.samplesPerStep = 64;
    double time = 0;
    for (size_t j = 0; j < kCostTerms; ++j) time += truth[j] * t.features[j];
    s.throughput.push_back(64 / time);
    s.candidates.push_back(t);
  }
  for (size_t i = 0; i < s.throughput.size(); ++i)
    if (s.throughput[i] > s.throughput[s.best]) s.best = i;
  return s;
}

// Runs the tuner against the surface; returns the candidates it ran, in order.
std::vector<size_t> tune(Tuner& tuner, const Surface& s) {
  std::vector<size_t> ran;
  while (auto c = tuner.next()) {
    ran.push_back(*c);
    tuner.record(*c, s.throughput[*c], s.candidates[*c].samplesPerStep / s.throughput[*c]);
  }
  return ran;
}

}  // namespace

TEST_CASE("tuners: gridsearch in order, random a seeded permutation, the cap and early stop") {
  const Surface s = surface();
  const size_t n = s.candidates.size();
  REQUIRE(n == 4 * 5);  // micro 1, 2, 4, 8, 16 (16 samples a rank) at four stages
  TunerSettings grid;
  grid.earlyStopping = 1000;
  Tuner all(s.candidates, grid);
  const auto ran = tune(all, s);
  REQUIRE(ran.size() == n);
  for (size_t i = 0; i < n; ++i) CHECK(ran[i] == i);
  CHECK(all.best() == s.best);
  CHECK(all.stopReason() == "every candidate tried");

  TunerSettings random = grid;
  random.type = runtime::TunerType::Random;
  Tuner shuffled(s.candidates, random), again(s.candidates, random);
  const auto order = tune(shuffled, s);
  CHECK(order == tune(again, s));  // the same seed, the same order
  CHECK(std::set<size_t>(order.begin(), order.end()).size() == n);
  CHECK(order != ran);

  TunerSettings capped = grid;
  capped.numTrials = 3;
  Tuner three(s.candidates, capped);
  CHECK(tune(three, s).size() == 3);
  CHECK_THAT(three.stopReason(), Catch::Contains("tuner_num_trials (3)"));

  // Early stopping: the grid's first candidate is the best of a surface that only falls.
  TunerSettings early = grid;
  early.earlyStopping = 2;
  Tuner falling(s.candidates, early);
  std::vector<size_t> seen;
  while (auto c = falling.next()) {
    seen.push_back(*c);
    falling.record(*c, 100.0 - static_cast<double>(seen.size()), std::nullopt);
  }
  CHECK(seen.size() == 3);
  CHECK(falling.best() == 0);
  CHECK_THAT(falling.stopReason(), Catch::Contains("tuner_early_stopping: 2 experiments"));
}

TEST_CASE("model_based finds the best of a known surface in a fraction of the grid") {
  const Surface s = surface();
  TunerSettings settings;
  settings.type = runtime::TunerType::ModelBased;
  settings.earlyStopping = 1000;
  Tuner tuner(s.candidates, settings);
  const auto ran = tune(tuner, s);
  INFO("ran " << ran.size() << " of " << s.candidates.size() << "; " << tuner.stopReason());
  CHECK(ran.size() * 4 <= s.candidates.size());
  REQUIRE(tuner.best());
  CHECK(s.throughput[*tuner.best()] >= 0.95 * s.throughput[s.best]);
  CHECK_THAT(tuner.stopReason(), Catch::Contains("predicts no untried candidate"));
}

TEST_CASE("tuners: a failed experiment never wins, and latency ranks lower first") {
  const Surface s = surface();
  TunerSettings settings;
  settings.metric = runtime::TuningMetric::Latency;
  settings.numTrials = 3;
  Tuner tuner(s.candidates, settings);
  tuner.record(*tuner.next(), std::nullopt, std::nullopt);  // failed
  tuner.record(*tuner.next(), 900.0, std::nullopt);
  tuner.record(*tuner.next(), 700.0, std::nullopt);
  CHECK(tuner.best() == 2);
  CHECK(tuner.bestMetric() == 700.0);
  CHECK(tuner.better(1.0, 2.0));
}
