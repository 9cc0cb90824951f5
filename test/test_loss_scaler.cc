// fp16 loss scaling step by step against DeepSpeed's DynamicLossScaler.update_scale rule
// (deepspeed/runtime/fp16/loss_scaler.py), worked out by hand for each scenario below.
#include <catch2/catch.hpp>

#include "common/error.h"
#include "runtime/precision/loss_scaler.h"

using namespace ds::runtime;

namespace {

// Feeds `overflows` ('x' = overflow, '.' = clean) and returns the scale after each update.
std::vector<double> run(const LossScaleConfig& config, const std::string& overflows) {
  LossScaler scaler(config, true);
  std::vector<double> scales;
  for (char c : overflows) {
    scaler.update(c == 'x');
    scales.push_back(scaler.scale());
  }
  return scales;
}

}  // namespace

TEST_CASE("loss scaler: hysteresis delays the first halving, window doubles after clean steps") {
  LossScaleConfig c;
  c.initialScalePower = 4;
  c.window = 3;
  c.hysteresis = 2;
  // iter 0: overflow uses up hysteresis (16); 1: halves (8); 2..4: stable intervals 0, 1, 2;
  // 5: stable 3 = window -> 16 and hysteresis refilled; 8: 32; 9: overflow eats hysteresis;
  // 10: clean (hysteresis stays 1 without consecutive_hysteresis); 11: overflow halves -> 16.
  CHECK(run(c,
            "xx......."
            "x.x") == std::vector<double>{16, 8, 8, 8, 8, 16, 16, 16, 32, 32, 32, 16});
  LossScaler initial(c, true);
  CHECK(initial.scale() == 16);
}

TEST_CASE("loss scaler: consecutive_hysteresis refills hysteresis on every clean step") {
  LossScaleConfig c;
  c.initialScalePower = 4;
  c.window = 1000;
  c.hysteresis = 2;
  c.consecutiveHysteresis = true;
  CHECK(run(c, "x.x.x") == std::vector<double>{16, 16, 16, 16, 16});
  c.consecutiveHysteresis = false;
  CHECK(run(c, "x.x.x") == std::vector<double>{16, 16, 8, 8, 4});
}

TEST_CASE("loss scaler: the minimum scale is a floor, and an overflow at it stops the run") {
  LossScaleConfig c;
  c.initialScalePower = 2;
  c.hysteresis = 1;
  c.minScale = 1;
  LossScaler scaler(c, true);
  scaler.update(true);
  CHECK(scaler.scale() == 2);
  scaler.update(true);
  CHECK(scaler.scale() == 1);
  CHECK_THROWS_WITH(scaler.update(true), Catch::Contains("overflowed at the minimum loss scale") &&
                                             Catch::Contains("fp16.min_loss_scale"));
  c.minScale = 3;  // not a power of two: max(scale / 2, min)
  LossScaler floor(c, true);
  floor.update(true);
  CHECK(floor.scale() == 3);
}

TEST_CASE("loss scaler: static scale and non-fp16 runs never change, state round-trips") {
  LossScaleConfig c;
  c.staticScale = 128;
  LossScaler fixed(c, true);
  CHECK_FALSE(fixed.dynamic());
  fixed.update(true);
  CHECK(fixed.scale() == 128);
  LossScaler bf16(LossScaleConfig{}, false);
  CHECK(bf16.scale() == 1);

  LossScaleConfig d;
  d.window = 2;
  LossScaler a(d, true), b(d, true);
  for (bool o : {true, false, false, false, true}) a.update(o);
  b.restore(a.state());
  for (bool o : {false, false, false, true, false}) {
    a.update(o);
    b.update(o);
    CHECK(a.scale() == b.scale());
  }
}
