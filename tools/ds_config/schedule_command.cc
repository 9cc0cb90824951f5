// ds-config schedule: the lr (and momentum, when OneCycle cycles it) that each optimizer update
// 0..N-1 uses, as DeepSpeed's engine applies its scheduler: a text chart, or JSON for scripts.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "runtime/config/ds_config.h"
#include "runtime/lr/lr_schedule.h"
#include "tools/ds_config/commands.h"

namespace ds::tools {
namespace {

struct ScheduleOptions {
  std::string config;
  int64_t steps = 0;
  int64_t worldSize = 1;
  bool json = false;
};

struct Row {
  int64_t step;
  double lr;
  std::optional<double> momentum;
};

constexpr int kBarWidth = 36;  // keeps a momentum row within 80 columns
constexpr int64_t kMaxChartRows = 40;

std::vector<Row> computeRows(const runtime::DeepSpeedConfig& c, int64_t steps) {
  const runtime::OptimizerConfig optimizer = c.optimizer.value_or(runtime::OptimizerConfig{});
  std::vector<Row> rows;
  if (!c.scheduler) {
    for (int64_t i = 0; i < steps; ++i) rows.push_back({i, optimizer.lr(), std::nullopt});
    return rows;
  }
  auto schedule = runtime::makeLrSchedule(*c.scheduler, optimizer.lr(), optimizer.momentum());
  // DeepSpeed's OneCycle cycles betas[0]; torch SGD has no betas, so DeepSpeed turns cycling off.
  const bool hasBetas = optimizer.type != runtime::OptimizerType::SGD;
  if (schedule->momentum() && !hasBetas) {
    std::cerr << "warning: cycle_momentum has no effect with SGD (DeepSpeed disables it: SGD has "
                 "no betas)\n";
  }
  for (int64_t i = 0; i < steps; ++i) {
    rows.push_back({i, schedule->lr(), hasBetas ? schedule->momentum() : std::nullopt});
    schedule->step();  // after update i, as DeepSpeed's engine does
  }
  return rows;
}

void printJson(const std::vector<Row>& rows) {
  // nlohmann writes the shortest text that reads back as the same double.
  std::cout << '[';
  for (size_t i = 0; i < rows.size(); ++i) {
    if (i) std::cout << ", ";
    std::cout << "{\"step\": " << rows[i].step << ", \"lr\": " << nlohmann::json(rows[i].lr).dump();
    if (rows[i].momentum)
      std::cout << ", \"momentum\": " << nlohmann::json(*rows[i].momentum).dump();
    std::cout << '}';
  }
  std::cout << "]\n";
}

void printChart(const ScheduleOptions& o, const runtime::DeepSpeedConfig& c,
                const std::vector<Row>& rows) {
  const std::string name =
      c.scheduler ? runtime::schedulerTypeName(c.scheduler->type) : "no scheduler (constant lr)";
  std::cout << o.config << ": " << name << ", " << rows.size() << " optimizer updates\n";
  if (rows.empty()) return;
  double maxLr = 0.0;
  for (const Row& r : rows) maxLr = std::max(maxLr, r.lr);
  const bool momentum = rows.front().momentum.has_value();
  // Long runs are sampled evenly; first and last update always shown.
  std::vector<size_t> shown;
  const int64_t n = static_cast<int64_t>(rows.size());
  if (n <= kMaxChartRows) {
    for (int64_t i = 0; i < n; ++i) shown.push_back(i);
  } else {
    for (int64_t k = 0; k < kMaxChartRows; ++k) shown.push_back(k * (n - 1) / (kMaxChartRows - 1));
    std::cout << "(" << kMaxChartRows << " of " << n << " updates shown; --json lists all)\n";
  }
  char header[96];
  std::snprintf(header, sizeof(header), "%8s  %-12s%s  lr bar (full: %.4g)\n", "step", "lr",
                momentum ? "  momentum" : "", maxLr);
  std::cout << header;
  for (size_t i : shown) {
    const Row& r = rows[i];
    const int bar = maxLr > 0 ? static_cast<int>(r.lr / maxLr * kBarWidth + 0.5) : 0;
    char line[160];
    int len =
        std::snprintf(line, sizeof(line), "%8lld  %-12.6g", static_cast<long long>(r.step), r.lr);
    if (momentum) len += std::snprintf(line + len, sizeof(line) - len, "  %-8.6g", *r.momentum);
    std::cout << line << "  |" << std::string(std::clamp(bar, 0, kBarWidth), '#') << '\n';
  }
}

void runSchedule(const ScheduleOptions& o) {
  const runtime::DeepSpeedConfig c = runtime::loadDeepSpeedConfig(o.config, o.worldSize);
  for (const std::string& warning : c.warnings) std::cerr << "warning: " << warning << '\n';
  const std::vector<Row> rows = computeRows(c, o.steps);
  if (o.json) {
    printJson(rows);
  } else {
    printChart(o, c, rows);
  }
}

}  // namespace

void addScheduleCommand(CLI::App& app) {
  auto o = std::make_shared<ScheduleOptions>();
  CLI::App* cmd = app.add_subcommand(
      "schedule", "Print the lr (and cycled momentum) of optimizer updates 0..N-1 of CONFIG");
  cmd->add_option("config", o->config, "DeepSpeed JSON config")->required();
  cmd->add_option("--steps", o->steps, "number of optimizer updates N")
      ->required()
      ->check(CLI::Range(int64_t{1}, int64_t{10000000}));
  cmd->add_option("--world-size", o->worldSize,
                  "data-parallel ranks (only batch inference uses it)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  cmd->add_flag("--json", o->json, R"(print [{"step": 0, "lr": ..., "momentum": ...}, ...])");
  cmd->callback([o] { runSchedule(*o); });
}

}  // namespace ds::tools
