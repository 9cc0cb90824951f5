// The tuner types and their stopping rules: see the header.
#include "launcher/autotuning/tuner.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>

namespace ds::launcher {

Tuner::Tuner(std::vector<TunerCandidate> candidates, TunerSettings settings)
    : candidates_(std::move(candidates)), settings_(settings), tried_(candidates_.size(), false) {
  order_.resize(candidates_.size());
  std::iota(order_.begin(), order_.end(), size_t{0});
  if (settings_.type == runtime::TunerType::Random) {
    std::mt19937_64 random(settings_.seed);
    std::shuffle(order_.begin(), order_.end(), random);
  }
}

bool Tuner::better(double a, double b) const {
  return settings_.metric == runtime::TuningMetric::Latency ? a < b : a > b;
}

double Tuner::predictedStepSeconds(size_t c) const {
  return model_.stepSeconds(candidates_[c].features);
}

double Tuner::predictedMetric(size_t c) const {
  const double t = std::max(1e-12, predictedStepSeconds(c));
  switch (settings_.metric) {
    case runtime::TuningMetric::Latency:
      return t * 1e6;  // microseconds, as the metric file has it
    case runtime::TuningMetric::Flops:
      return candidates_[c].flopsPerStepPerRank / t;
    case runtime::TuningMetric::Throughput:
      break;
  }
  return candidates_[c].samplesPerStep / t;
}

std::vector<size_t> Tuner::plannedOrder() const {
  if (settings_.type != runtime::TunerType::ModelBased) return order_;
  std::vector<size_t> order(candidates_.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return better(predictedMetric(a), predictedMetric(b));
  });
  return order;
}

std::optional<size_t> Tuner::nextModelBased() {
  std::optional<size_t> pick;
  for (size_t c = 0; c < candidates_.size(); ++c)
    if (!tried_[c] && (!pick || better(predictedMetric(c), predictedMetric(*pick)))) pick = c;
  if (!pick) return std::nullopt;
  if (bestMetric_ && !errors_.empty()) {
    // Worth running while the best untried candidate, taken as much better than predicted as
    // the model has lately been wrong, could beat the best measured by more than the margin.
    double error = 0;
    for (size_t i = errors_.size() > 2 ? errors_.size() - 2 : 0; i < errors_.size(); ++i)
      error = std::max(error, errors_[i]);
    const bool latency = settings_.metric == runtime::TuningMetric::Latency;
    const double hoped = latency ? predictedMetric(*pick) * (1 - error)
                                 : predictedMetric(*pick) * (1 + error);
    const double bar = latency ? *bestMetric_ * (1 - settings_.modelMargin)
                               : *bestMetric_ * (1 + settings_.modelMargin);
    if (!better(hoped, bar)) {
      char text[200];
      std::snprintf(text, sizeof text,
                    "the cost model, allowing for its recent error (%.0f%%), predicts no untried "
                    "candidate more than %.0f%% better than the best measured",
                    100 * error, 100 * settings_.modelMargin);
      stopReason_ = text;
      return std::nullopt;
    }
  }
  return pick;
}

std::optional<size_t> Tuner::next() {
  if (!stopReason_.empty()) return std::nullopt;
  if (trials_ >= settings_.numTrials) {
    stopReason_ = "tuner_num_trials (" + std::to_string(settings_.numTrials) + ") reached";
    return std::nullopt;
  }
  if (best_ && trials_ >= bestTrial_ + settings_.earlyStopping) {
    stopReason_ = "tuner_early_stopping: " + std::to_string(settings_.earlyStopping) +
                  " experiments without a better one";
    return std::nullopt;
  }
  std::optional<size_t> pick;
  if (settings_.type == runtime::TunerType::ModelBased) {
    pick = nextModelBased();
    if (!pick && stopReason_.empty()) stopReason_ = "every candidate tried";
    return pick;
  }
  while (cursor_ < order_.size() && tried_[order_[cursor_]]) ++cursor_;
  if (cursor_ == order_.size()) {
    stopReason_ = "every candidate tried";
    return std::nullopt;
  }
  return order_[cursor_];
}

void Tuner::record(size_t c, std::optional<double> metric, std::optional<double> stepSeconds) {
  tried_[c] = true;
  ++trials_;
  if (metric && model_.observations() > 0)
    errors_.push_back(std::fabs(predictedMetric(c) - *metric) / std::fabs(*metric));
  if (stepSeconds) model_.observe(candidates_[c].features, *stepSeconds);
  if (metric && (!bestMetric_ || better(*metric, *bestMetric_))) {
    best_ = c;
    bestMetric_ = metric;
    bestTrial_ = trials_;
  }
}

}  // namespace ds::launcher
