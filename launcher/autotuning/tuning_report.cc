// The autotuner's table and summary files: see the header.
#include "launcher/autotuning/tuning_report.h"

#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "runtime/checkpoint/checkpoint_files.h"

namespace ds::launcher {
namespace {

std::string mib(const std::optional<double>& bytes) {
  if (!bytes) return "-";
  char text[32];
  std::snprintf(text, sizeof text, "%.0f", *bytes / 1048576.0);
  return text;
}

std::string number(const std::optional<double>& value) {
  if (!value) return "-";
  char text[32];
  std::snprintf(text, sizeof text, "%.4g", *value);
  return text;
}

}  // namespace

const char* metricUnit(runtime::TuningMetric metric) {
  switch (metric) {
    case runtime::TuningMetric::Throughput:
      return "samples/s";
    case runtime::TuningMetric::Latency:
      return "us/step";
    case runtime::TuningMetric::Flops:
      return "FLOPS/rank";
  }
  return "?";
}

std::string formatTuningTable(const std::vector<ExperimentRecord>& records,
                              const std::vector<size_t>& runOrder, runtime::TuningMetric metric,
                              std::optional<size_t> best) {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line, "  %-3s %-34s %-10s %9s %9s %11s %11s %8s\n", "#", "experiment",
                "status", "mem pred", "mem meas", "pred", "measured", "wall s");
  out += line;
  std::snprintf(line, sizeof line, "  %-3s %-34s %-10s %9s %9s %11s %11s %8s\n", "", "", "", "MiB",
                "MiB", metricUnit(metric), metricUnit(metric), "");
  out += line;
  int n = 0;
  for (size_t i : runOrder) {
    const ExperimentRecord& r = records[i];
    std::snprintf(line, sizeof line, "%s %-3d %-34s %-10s %9s %9s %11s %11s %8.1f\n",
                  best && *best == i ? "*" : " ", ++n, r.name.c_str(),
                  r.reused ? "reused" : experimentStatusName(r.status),
                  mib(r.predictedPeakBytes).c_str(), mib(r.measuredPeakBytes).c_str(),
                  number(r.predictedMetric).c_str(), number(r.metric).c_str(), r.wallSeconds);
    out += line;
    if (!r.why.empty() && r.status != ExperimentStatus::Ok) out += "      " + r.why + "\n";
  }
  return out + formatSetAside(records);
}

std::string formatSetAside(const std::vector<ExperimentRecord>& records) {
  std::string out;
  // Counted by the check that set them aside, with its first case's reason.
  std::map<std::string, std::pair<int, const ExperimentRecord*>> pruned;
  for (const ExperimentRecord& r : records)
    if (!r.pruned.empty()) {
      auto& [count, first] = pruned[r.prunedBy];
      if (count++ == 0) first = &r;
    }
  for (const auto& [by, entry] : pruned)
    out += "  not run: " + std::to_string(entry.first) + " candidate(s), by " + by + "; e.g. " +
           entry.second->name + ": " + entry.second->pruned + "\n";
  return out;
}

void writeTuningSummary(const std::string& resultsDir, const std::vector<ExperimentRecord>& records,
                        const std::vector<size_t>& runOrder, runtime::TuningMetric metric,
                        std::optional<size_t> best, const std::string& outcome) {
  runtime::writeTextAtomically(resultsDir + "/summary.txt",
                               formatTuningTable(records, runOrder, metric, best) + outcome + "\n");
  nlohmann::ordered_json all = nlohmann::ordered_json::array();
  for (const ExperimentRecord& r : records) {
    nlohmann::ordered_json e = {{"name", r.name}, {"choice", r.choice.describe()}};
    if (r.predictedPeakBytes) e["predicted_peak_bytes"] = *r.predictedPeakBytes;
    if (!r.pruned.empty()) {
      e["status"] = "pruned";
      e["why"] = r.pruned;
    } else if (!r.ran) {
      e["status"] = "not run";
    } else {
      e["status"] = r.reused ? "reused" : experimentStatusName(r.status);
      if (r.predictedMetric) e["predicted_metric"] = *r.predictedMetric;
      if (r.metric) e["metric"] = *r.metric;
      if (r.measuredPeakBytes) e["measured_peak_bytes"] = *r.measuredPeakBytes;
      e["step_seconds"] = r.stepSeconds;
      e["wall_seconds"] = r.wallSeconds;
      if (!r.why.empty()) e["why"] = r.why;
    }
    all.push_back(e);
  }
  nlohmann::ordered_json summary = {
      {"metric", runtime::tuningMetricName(metric)},
      {"outcome", outcome},
      {"best", best ? nlohmann::ordered_json(records[*best].name) : nlohmann::ordered_json()},
      {"experiments", all}};
  runtime::writeTextAtomically(resultsDir + "/summary.json", summary.dump(2) + "\n");
}

}  // namespace ds::launcher
