// PhaseTimer: adds a scope's wall time to a millisecond total, for wall_clock_breakdown's
// optional timers. Without a total (breakdown off) it reads no clock: the cost is a null test,
// and nothing it does can reach a numeric result.
#pragma once

#include <chrono>

namespace ds {

class PhaseTimer {
 public:
  explicit PhaseTimer(double* totalMs) : total_(totalMs) {
    if (total_) start_ = std::chrono::steady_clock::now();
  }
  ~PhaseTimer() {
    if (total_)
      *total_ +=
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_)
              .count();
  }
  PhaseTimer(const PhaseTimer&) = delete;
  PhaseTimer& operator=(const PhaseTimer&) = delete;

 private:
  double* total_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace ds
