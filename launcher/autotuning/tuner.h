// Which candidate to run next and when to stop, for DeepSpeed's three tuner types:
// gridsearch (the space's order), random (a shuffled order, seeded so a rerun repeats it) and
// model_based (the best the cost model predicts, refitted after every experiment, stopping once
// no untried candidate, its prediction raised by the model's error on its last two predictions,
// could beat the best measured by more than 5%; never before the fitted model has been tested
// on one prediction of its own). All three
// stop at tuner_num_trials experiments and after tuner_early_stopping experiments in a row
// without a better one, as DeepSpeed's do. Knows nothing of processes: the autotuner runs what
// next() names and reports back through record().
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "launcher/autotuning/tuning_cost_model.h"
#include "runtime/config/autotuning_config.h"

namespace ds::launcher {

struct TunerSettings {
  runtime::TunerType type = runtime::TunerType::GridSearch;
  runtime::TuningMetric metric = runtime::TuningMetric::Throughput;
  int64_t earlyStopping = 5;
  int64_t numTrials = 50;
  // model_based: stop when no untried candidate, allowing for the model's recent error, could
  // beat the best measured by more than this.
  double modelMargin = 0.05;
  uint64_t seed = 1234;
};

// What the tuner knows of a candidate before it runs: its cost features (model_based) and the
// samples and flops of its step, to turn a predicted step time into the metric.
struct TunerCandidate {
  CostFeatures features{};
  double samplesPerStep = 0;
  double flopsPerStepPerRank = 0;
};

class Tuner {
 public:
  Tuner(std::vector<TunerCandidate> candidates, TunerSettings settings);

  // The candidate to run next; nullopt when the tuning is over (stopReason() says why).
  std::optional<size_t> next();
  // A finished experiment: its metric, or nullopt when it failed (it never becomes the best).
  // stepSeconds refits the cost model where known.
  void record(size_t candidate, std::optional<double> metric, std::optional<double> stepSeconds);
  // A candidate set aside without running (it no longer fits the memory guard): not a trial.
  void skip(size_t candidate) { tried_[candidate] = true; }

  // The metric the cost model predicts for a candidate now.
  double predictedMetric(size_t candidate) const;
  double predictedStepSeconds(size_t candidate) const;
  // The candidates in the order the tuner would run them now, before any measurement (the dry
  // run's order).
  std::vector<size_t> plannedOrder() const;

  std::optional<size_t> best() const { return best_; }
  std::optional<double> bestMetric() const { return bestMetric_; }
  const std::string& stopReason() const { return stopReason_; }
  int64_t trials() const { return trials_; }

  // Whether metric a beats b (latency: lower).
  bool better(double a, double b) const;

 private:
  std::optional<size_t> nextModelBased();
  std::vector<TunerCandidate> candidates_;
  TunerSettings settings_;
  CostModel model_;
  std::vector<size_t> order_;  // gridsearch and random
  size_t cursor_ = 0;
  std::vector<bool> tried_;
  int64_t trials_ = 0, bestTrial_ = 0;
  std::optional<size_t> best_;
  std::optional<double> bestMetric_;
  std::string stopReason_;
  // The relative errors of the model's predictions made after at least one measurement (the
  // priors' first guess says nothing of the fitted model), newest last.
  std::vector<double> errors_;
};

}  // namespace ds::launcher
