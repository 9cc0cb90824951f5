// The gradient norm's sum of squares over one tensor's slice, in 16 double lanes combined in a
// fixed order: vectorised (one serial chain of double adds cost 4 cycles an element, ~5 ms of
// every step of the demo's 3.3M parameters), and the same bits however the slice is fed in pieces
// (stage 0 feeds blocks of 1024, the other stages whole sub-groups), since an element's lane is its
// position in the slice.
#pragma once

#include <cmath>
#include <cstddef>

namespace ds::runtime {

class SquareSum {
 public:
  void add(const float* x, size_t n) {
    size_t i = 0;
    for (; i < n && count_ % kLanes != 0; ++i, ++count_) addAt(count_ % kLanes, x[i]);
    double acc[kLanes];  // a local copy: GCC does not vectorise the loop over the members
    for (size_t j = 0; j < kLanes; ++j) acc[j] = lanes_[j];
    for (; i + kLanes <= n; i += kLanes, count_ += kLanes)
      for (size_t j = 0; j < kLanes; ++j) acc[j] += static_cast<double>(x[i + j]) * x[i + j];
    for (size_t j = 0; j < kLanes; ++j) lanes_[j] = acc[j];
    for (; i < n; ++i, ++count_) addAt(count_ % kLanes, x[i]);
  }
  // Not finite exactly when an element was not: finite squares of floats cannot overflow a double.
  double total() const {
    double s8[8], s4[4];
    for (size_t i = 0; i < 8; ++i) s8[i] = lanes_[i] + lanes_[i + 8];
    for (size_t i = 0; i < 4; ++i) s4[i] = s8[i] + s8[i + 4];
    return (s4[0] + s4[2]) + (s4[1] + s4[3]);
  }

 private:
  static constexpr size_t kLanes = 16;
  void addAt(size_t lane, float v) { lanes_[lane] += static_cast<double>(v) * v; }
  double lanes_[kLanes] = {};
  size_t count_ = 0;
};

}  // namespace ds::runtime
