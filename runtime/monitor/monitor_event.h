// One monitor event, as DeepSpeed's engine hands them to its monitors: a name such as
// "Train/Samples/train_loss", a value, and the step (DeepSpeed's x axis: samples seen).
#pragma once

#include <cstdint>
#include <string>

namespace ds::runtime {

struct MonitorEvent {
  std::string name;
  double value;
  int64_t step;
};

}  // namespace ds::runtime
