// The five LR schedules against golden values from DeepSpeed's own lr_schedules.py
// (test/golden/lr_schedules.json, written by test/golden/gen_lr_schedules.py), checkpoint resume
// through setLastBatchIteration, and the scheduler block's errors.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/error.h"
#include "runtime/config/ds_config.h"
#include "runtime/lr/lr_schedule.h"
#include "runtime/lr/warmup_lr.h"

using namespace ds::runtime;
using nlohmann::json;

namespace {

json loadGolden() {
  const std::string path = std::string(DS_SOURCE_DIR) + "/test/golden/lr_schedules.json";
  std::ifstream in(path);
  if (!in) FAIL("cannot open " << path);
  return json::parse(in);
}

// The scheduler block of a golden case, inside the smallest complete config.
DeepSpeedConfig configOf(const json& scheduler) {
  const json config = {{"train_batch_size", 1}, {"scheduler", scheduler}};
  return parseDeepSpeedConfig(config.dump(), 1, "golden.json");
}

// The golden values are DeepSpeed's doubles written with repr(): our arithmetic follows its order
// of operations, so they match to the last bit; 1e-12 relative allows only a libm difference.
bool close(double actual, double expected) {
  return actual == expected ||
         std::fabs(actual - expected) <= 1e-12 * std::max(std::fabs(actual), std::fabs(expected));
}

struct Trace {
  std::vector<double> lr;
  std::vector<std::optional<double>> momentum;
};

Trace run(LrSchedule& schedule, int steps) {
  Trace t;
  for (int i = 0; i < steps; ++i) {
    t.lr.push_back(schedule.lr());
    t.momentum.push_back(schedule.momentum());
    schedule.step();  // after the optimizer update that used lr()
  }
  return t;
}

std::unique_ptr<LrSchedule> scheduleOf(const json& c) {
  return makeLrSchedule(*configOf(c["scheduler"]).scheduler, c["optimizer_lr"].get<double>(),
                        c["optimizer_momentum"].get<double>());
}

}  // namespace

TEST_CASE("lr schedules: every update's lr and momentum equal DeepSpeed's", "[lr]") {
  const json golden = loadGolden();
  REQUIRE(golden["cases"].size() >= 30);
  int exact = 0, total = 0;
  for (const json& c : golden["cases"]) {
    const std::string name = c["name"];
    INFO(name << ": " << c["scheduler"].dump());
    if (c.contains("error")) {
      // DeepSpeed's constructor raises; our parser refuses the config before that.
      REQUIRE_THROWS_AS(configOf(c["scheduler"]), ds::Error);
      continue;
    }
    const auto schedule = scheduleOf(c);
    const Trace t = run(*schedule, c["steps"].get<int>());
    const std::vector<double> lr = c["lr"];
    REQUIRE(t.lr.size() == lr.size());
    for (size_t i = 0; i < lr.size(); ++i) {
      INFO("update " << i << ": lr " << t.lr[i] << ", DeepSpeed " << lr[i]);
      REQUIRE(close(t.lr[i], lr[i]));
      exact += t.lr[i] == lr[i];
      ++total;
    }
    const bool cycles = c.contains("momentum");
    for (size_t i = 0; i < t.momentum.size(); ++i) {
      INFO("update " << i);
      REQUIRE(t.momentum[i].has_value() == cycles);
      if (cycles) {
        const double expected = c["momentum"][i];
        INFO("momentum " << *t.momentum[i] << ", DeepSpeed " << expected);
        REQUIRE(close(*t.momentum[i], expected));
        exact += *t.momentum[i] == expected;
        ++total;
      }
    }
  }
  // Not required, but a drop here means the order of operations drifted from DeepSpeed's.
  WARN(exact << " of " << total << " golden values matched bit for bit");
}

TEST_CASE("lr schedules: resuming from lastBatchIteration reproduces the straight run", "[lr]") {
  const json golden = loadGolden();
  for (const json& c : golden["cases"]) {
    if (c.contains("error")) continue;
    const int steps = c["steps"].get<int>();
    const auto straight = scheduleOf(c);
    const Trace expected = run(*straight, steps);
    const bool fromConfigIteration = c["scheduler"]["params"].contains("last_batch_iteration");
    for (int k = 0; k < steps; ++k) {
      // A checkpoint taken after k updates stores the iteration; a fresh schedule restores it.
      const auto first = scheduleOf(c);
      for (int i = 0; i < k; ++i) first->step();
      const int64_t saved = first->lastBatchIteration();
      // Before any step, a config last_batch_iteration != -1 leaves the optimizer's lr in place,
      // which no iteration reproduces (DeepSpeed restores it from the optimizer's state instead).
      if (k == 0 && fromConfigIteration) continue;
      const auto resumed = scheduleOf(c);
      resumed->setLastBatchIteration(saved);
      const Trace rest = run(*resumed, steps - k);
      INFO(c["name"].get<std::string>() << " resumed after " << k << " updates");
      for (int i = k; i < steps; ++i) {
        REQUIRE(rest.lr[i - k] == expected.lr[i]);
        REQUIRE(rest.momentum[i - k] == expected.momentum[i]);
      }
    }
  }
}

TEST_CASE("WarmupLR: updates 0 and 1 both use warmup_min_lr, then min + delta * gamma", "[lr]") {
  WarmupLrParams params;
  params.warmupMinLr = 0.001;
  params.warmupMaxLr = 0.011;
  params.warmupNumSteps = 10;
  for (WarmupType type : {WarmupType::Log, WarmupType::Linear}) {
    params.warmupType = type;
    WarmupLr schedule(params, -1, 0.5, 0.9);
    const Trace t = run(schedule, 14);
    CHECK(t.lr[0] == 0.001);
    CHECK(t.lr[1] == 0.001);  // DeepSpeed's oddity: iteration 0 has gamma 0
    for (int i = 2; i < 14; ++i) {
      const int iteration = i - 1;
      double gamma = 1.0;
      if (iteration < 10)
        gamma =
            type == WarmupType::Log ? std::log(iteration + 1.0) / std::log(10.0) : iteration / 10.0;
      INFO("update " << i);
      CHECK(t.lr[i] == Approx(0.001 + 0.01 * gamma).epsilon(1e-12));
    }
    CHECK(t.lr[13] == 0.011);
    CHECK_FALSE(t.momentum[5].has_value());
  }
}

TEST_CASE("WarmupLR: warmup_num_steps 1 behaves as 2, no warmup_max_lr means the optimizer's lr",
          "[lr]") {
  WarmupLrParams params;
  params.warmupMaxLr = 1.0;
  params.warmupNumSteps = 1;
  params.warmupType = WarmupType::Linear;
  WarmupLr schedule(params, -1, 0.25, 0.9);
  CHECK(run(schedule, 4).lr == std::vector<double>{0.0, 0.0, 0.5, 1.0});

  params.warmupMaxLr.reset();
  WarmupLr toOptimizerLr(params, -1, 0.25, 0.9);
  CHECK(run(toOptimizerLr, 4).lr == std::vector<double>{0.0, 0.0, 0.125, 0.25});
}

TEST_CASE("lr schedules: config last_batch_iteration keeps the optimizer's lr for update 0",
          "[lr]") {
  SchedulerConfig config;
  config.type = SchedulerType::OneCycle;
  config.oneCycle.cycleMinLr = 0.1;
  config.oneCycle.cycleMaxLr = 0.5;
  config.oneCycle.cycleFirstStepSize = 4;
  config.lastBatchIteration = 1;
  const auto schedule = makeLrSchedule(config, 0.03, 0.7);
  CHECK(schedule->lr() == 0.03);
  CHECK(schedule->momentum() == 0.7);  // the optimizer's own beta1, untouched
  schedule->step();                    // iteration 2: scale 3/4
  CHECK(schedule->lr() == Approx(0.4).epsilon(1e-12));
  CHECK(*schedule->momentum() == Approx(0.9 - 0.1 * 0.75).epsilon(1e-12));
  CHECK(schedule->lastBatchIteration() == 2);
}

TEST_CASE("lr schedules: setLastBatchIteration below -1 is refused", "[lr]") {
  const auto schedule = makeLrSchedule(SchedulerConfig{}, 0.1, 0.9);
  REQUIRE_THROWS_WITH(schedule->setLastBatchIteration(-2),
                      Catch::Contains("expected an iteration >= -1, got -2"));
}

TEST_CASE("scheduler config: defaults, required params and errors name the JSON path", "[lr]") {
  const auto parse = [](const std::string& scheduler) {
    return parseDeepSpeedConfig(R"({"train_batch_size": 1, "scheduler": )" + scheduler + "}", 1,
                                "configs/x.json");
  };
  // A type alone means every default (DeepSpeed would crash on the missing params).
  const DeepSpeedConfig range = parse(R"({"type": "LRRangeTest"})");
  CHECK(range.scheduler->type == SchedulerType::LrRangeTest);
  CHECK(range.scheduler->lrRangeTest.lrRangeTestMinLr == 1e-3);
  CHECK(range.scheduler->lrRangeTest.lrRangeTestStepSize == 2000);
  CHECK(range.scheduler->lrRangeTest.lrRangeTestStepRate == 1.0);
  CHECK_FALSE(range.scheduler->lrRangeTest.lrRangeTestStaircase);
  const DeepSpeedConfig cosine =
      parse(R"({"type": "WarmupCosineLR", "params": {"total_num_steps": 9}})");
  CHECK(cosine.scheduler->warmupCosineLr.cosMinRatio == 0.0001);
  CHECK(cosine.scheduler->warmupCosineLr.warmupNumSteps == 1000);
  CHECK(cosine.warnings.size() == 1);  // total_num_steps 9 < warmup_num_steps 1000, as DeepSpeed
  CHECK(cosine.warnings[0].find("total_num_steps: 9 is less than warmup_num_steps 1000") !=
        std::string::npos);
  const DeepSpeedConfig cycle =
      parse(R"({"type": "OneCycle", "params": {"cycle_min_lr": 0, "cycle_max_lr": 1,
                "cycle_second_step_size": 7, "cycle_second_stair_count": 2,
                "cycle_momentum": false, "decay_mom_rate": -0.5}})");
  CHECK(cycle.scheduler->oneCycle.cycleFirstStepSize == 2000);
  CHECK(cycle.scheduler->oneCycle.cycleSecondStepSize == 7);
  CHECK(cycle.scheduler->oneCycle.cycleSecondStairCount == 2);
  CHECK_FALSE(cycle.scheduler->oneCycle.cycleMomentum);
  CHECK(cycle.scheduler->oneCycle.decayMomRate == -0.5);
  const DeepSpeedConfig decay = parse(
      R"({"type": "WarmupDecayLR", "params": {"total_num_steps": 5000, "last_batch_iteration": 7}})");
  CHECK(decay.scheduler->warmupDecayLr.warmupMaxLr == 0.001);
  CHECK(decay.scheduler->lastBatchIteration == 7);
  CHECK(decay.warnings.empty());

  struct Row {
    const char* scheduler;
    const char* message;
  };
  const std::vector<Row> rows = {
      {R"({"type": "WarmupDecayLR"})",
       "configs/x.json: scheduler.params.total_num_steps: missing; this schedule has no default "
       "for it (an integer >= 1)"},
      {R"({"type": "WarmupCosineLR", "params": {"total_num_steps": 0}})",
       "configs/x.json: scheduler.params.total_num_steps: expected an integer >= 1, got 0"},
      {R"({"type": "OneCycle", "params": {"cycle_max_lr": 0.1}})",
       "scheduler.params.cycle_min_lr: missing; this schedule has no default for it (a number >= "
       "0)"},
      {R"({"type": "OneCycle", "params": {"cycle_min_lr": 0.1}})",
       "scheduler.params.cycle_max_lr: missing"},
      {R"({"type": "OneCycle", "params": {"cycle_min_lr": 0, "cycle_max_lr": 1,
          "cycle_first_step_size": 0}})",
       "scheduler.params.cycle_first_step_size: expected an integer >= 1, got 0"},
      {R"({"type": "OneCycle", "params": {"cycle_min_lr": 0, "cycle_max_lr": 1,
          "cycle_momentum": 1}})",
       "scheduler.params.cycle_momentum: expected true or false, got 1"},
      {R"({"type": "OneCycle", "params": {"cycle_min_lr": 0, "cycle_max_lr": 1,
          "cycle_max_mon": 0.8}})",
       R"(configs/x.json: unknown key "scheduler.params.cycle_max_mon" (did you mean )"
       R"("scheduler.params.cycle_max_mom"?))"},
      {R"({"type": "WarmupLR", "params": {"warmup_num_step": 10}})",
       R"(unknown key "scheduler.params.warmup_num_step" (did you mean )"
       R"("scheduler.params.warmup_num_steps"?))"},
      {R"({"type": "WarmupLR", "params": {"total_num_steps": 10}})",
       R"(unknown key "scheduler.params.total_num_steps")"},
      {R"({"type": "WarmupLR", "params": {"warmup_max_lr": "0.1"}})",
       R"(scheduler.params.warmup_max_lr: expected a number, got "0.1")"},
      {R"({"type": "WarmupLR", "params": {"warmup_min_lr": -1}})",
       "scheduler.params.warmup_min_lr: expected a number >= 0, got -1"},
      {R"({"type": "WarmupLR", "params": {"last_batch_iteration": -2}})",
       "scheduler.params.last_batch_iteration: expected an integer >= -1, got -2"},
      {R"({"type": "LRRangeTest", "params": {"lr_range_test_step_size": 2.5}})",
       "scheduler.params.lr_range_test_step_size: expected an integer, got 2.5"},
      // DeepSpeed refuses any non-int here ("must be a positive integer, got 5.0"), so do we.
      {R"({"type": "LRRangeTest", "params": {"lr_range_test_step_size": 5.0}})",
       "scheduler.params.lr_range_test_step_size: expected an integer, got 5.0 (DeepSpeed "
       "refuses a float here too); write 5"},
      {R"({"type": "LRRangeTest", "params": {"lr_range_test_step_size": 0}})",
       "scheduler.params.lr_range_test_step_size: expected an integer >= 1, got 0"},
      {R"({"type": "WarmupLR", "params": {"warmup_num_steps": 10.0}})",
       "scheduler.params.warmup_num_steps: expected an integer, got 10.0 (DeepSpeed refuses a "
       "float here too); write 10"},
      {R"({"type": "WarmupLR", "params": {"warmup_num_steps": 1e3}})",
       "scheduler.params.warmup_num_steps: expected an integer, got 1000.0 (DeepSpeed refuses a "
       "float here too); write 1000"},
      {R"({"type": "WarmupDecayLR", "params": {"total_num_steps": 40, "warmup_num_steps": 4.0}})",
       "scheduler.params.warmup_num_steps: expected an integer, got 4.0"},
      {R"({"type": "WarmupCosineLR", "params": {"total_num_steps": 40, "warmup_num_steps": 4.0}})",
       "scheduler.params.warmup_num_steps: expected an integer, got 4.0"},
      // DeepSpeed checks warmup_num_steps before anything else of these schedules.
      {R"({"type": "WarmupLR", "params": {"warmup_min_lr": -1, "warmup_num_steps": 2.0}})",
       "scheduler.params.warmup_num_steps: expected an integer, got 2.0"},
      {R"({"type": "LRRangeTest", "params": {"lr_range_test_staircase": "yes"}})",
       R"(scheduler.params.lr_range_test_staircase: expected true or false, got "yes")"},
      {R"({"type": "LRRangeTest", "params": [1]})",
       "scheduler.params: expected an object, got [1]"},
      {R"({"params": {}})", R"(scheduler.type: missing (supported: "WarmupLR", "WarmupDecayLR")"},
      {R"({"type": "OneCycleLR"})", R"(did you mean "OneCycle"?)"},
  };
  for (const Row& r : rows) {
    INFO(r.scheduler);
    REQUIRE_THROWS_WITH(parse(r.scheduler), Catch::Contains(r.message));
  }
}

namespace {

// The lrs (and momenta) of `steps` updates of the schedule configured by `scheduler`.
Trace traceOf(const json& scheduler, int steps) {
  auto schedule = makeLrSchedule(*configOf(scheduler).scheduler, 0.01, 0.9);
  return run(*schedule, steps);
}

}  // namespace

TEST_CASE("scheduler config: per-parameter-group lists of one value are that value", "[lr]") {
  const json scalar = {{"type", "OneCycle"},
                       {"params",
                        {{"cycle_min_lr", 0.001},
                         {"cycle_max_lr", 0.01},
                         {"cycle_first_step_size", 4},
                         {"cycle_min_mom", 0.85},
                         {"cycle_max_mom", 0.95}}}};
  json listed = scalar;
  for (const char* key : {"cycle_min_lr", "cycle_max_lr", "cycle_min_mom", "cycle_max_mom"})
    listed["params"][key] = json::array({scalar["params"][key]});
  const Trace a = traceOf(scalar, 12), b = traceOf(listed, 12);
  CHECK(a.lr == b.lr);
  CHECK(a.momentum == b.momentum);

  const json warmup = {{"type", "WarmupLR"},
                       {"params",
                        {{"warmup_min_lr", {0.0}},
                         {"warmup_max_lr", {0.02}},
                         {"warmup_num_steps", 4},
                         {"warmup_type", "linear"}}}};
  CHECK(traceOf(warmup, 6).lr.back() == 0.02);
  const json range = {{"type", "LRRangeTest"}, {"params", {{"lr_range_test_min_lr", {0.5}}}}};
  CHECK(traceOf(range, 1).lr.front() == 0.5);

  json twoGroups = warmup;
  twoGroups["params"]["warmup_max_lr"] = {0.02, 0.03};
  CHECK_THROWS_WITH(configOf(twoGroups),
                    Catch::Contains("scheduler.params.warmup_max_lr: 2 values given, one per "
                                    "parameter group, but this engine has one parameter group"));
  twoGroups["params"]["warmup_max_lr"] = json::array({"x"});
  CHECK_THROWS_WITH(configOf(twoGroups),
                    Catch::Contains("scheduler.params.warmup_max_lr[0]: expected a number"));
}

TEST_CASE("scheduler config: stair counts of -1 (DeepSpeed's default) mean no stairs", "[lr]") {
  json base = {
      {"type", "OneCycle"},
      {"params", {{"cycle_min_lr", 0.001}, {"cycle_max_lr", 0.01}, {"cycle_first_step_size", 5}}}};
  json minusOne = base;
  minusOne["params"]["cycle_first_stair_count"] = -1;
  minusOne["params"]["cycle_second_stair_count"] = -1;
  json stairs = base;
  stairs["params"]["cycle_first_stair_count"] = 2;
  CHECK(traceOf(minusOne, 14).lr == traceOf(base, 14).lr);
  CHECK(traceOf(stairs, 14).lr != traceOf(base, 14).lr);  // stairs do change the schedule
  minusOne["params"]["cycle_first_stair_count"] = -2;
  CHECK_THROWS_WITH(configOf(minusOne),
                    Catch::Contains("cycle_first_stair_count: expected an integer >= -1, got -2"));
}

// Except warmup_num_steps and lr_range_test_step_size, which DeepSpeed itself refuses as floats.
TEST_CASE("scheduler config: integral floats for counts DeepSpeed does not type-check", "[lr]") {
  const json scheduler = {
      {"type", "WarmupDecayLR"},
      {"params", {{"total_num_steps", 40.0}, {"warmup_num_steps", 4}, {"warmup_max_lr", 0.01}}}};
  const json exact = {
      {"type", "WarmupDecayLR"},
      {"params", {{"total_num_steps", 40}, {"warmup_num_steps", 4}, {"warmup_max_lr", 0.01}}}};
  CHECK(traceOf(scheduler, 45).lr == traceOf(exact, 45).lr);
  // OneCycle: DeepSpeed takes float(cycle_first_step_size).
  const json cycle = {{"type", "OneCycle"},
                      {"params",
                       {{"cycle_min_lr", 0.001},
                        {"cycle_max_lr", 0.01},
                        {"cycle_first_step_size", 5.0},
                        {"decay_step_size", 2.0}}}};
  json cycleExact = cycle;
  cycleExact["params"]["cycle_first_step_size"] = 5;
  cycleExact["params"]["decay_step_size"] = 2;
  CHECK(traceOf(cycle, 20).lr == traceOf(cycleExact, 20).lr);
}
