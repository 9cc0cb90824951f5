// Adam / AdamW over one contiguous range [begin, end) of the flat parameter buffer: the whole
// buffer at ZeRO stage 0, this rank's partition at stage 1. Moments exist only for that range,
// which is where stage 1's memory saving comes from.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "runtime/config/ds_config.h"
#include "runtime/model/model.h"

namespace ds::runtime {

class Adam {
 public:
  Adam(const AdamParams& params, const std::vector<ParamSpec>& specs, size_t begin, size_t end);

  // params and grads point at element `begin` of the flat buffers.
  void step(float* params, const float* grads, double lr);

  int64_t steps() const { return steps_; }
  size_t stateBytes() const { return (m_.size() + v_.size()) * sizeof(float); }

 private:
  struct Segment {
    size_t begin, end;  // relative to the range start
    bool decay;
  };
  AdamParams params_;
  std::vector<Segment> segments_;
  std::vector<float> m_, v_;
  int64_t steps_ = 0;
};

}  // namespace ds::runtime
