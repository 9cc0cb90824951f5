// ProgressBoard: the latest training progress, written by the job and read by the heartbeat thread.
#pragma once

#include <functional>
#include <mutex>
#include <string>

#include "worker/coordinator_client.h"

namespace ds::worker {

class ProgressBoard {
 public:
  void update(const Progress& progress) {
    bool first = false;
    {
      std::lock_guard lock(mutex_);
      first = progress_.step == 0 && progress.step > 0;
      progress_ = progress;
    }
    if (first && onFirstStep_) onFirstStep_();
  }
  // Called once, when the first step is done: the heartbeat goes out at once, so that ds-launch
  // sees the job's start-up end to the millisecond, not at the next interval.
  void onFirstStep(std::function<void()> callback) { onFirstStep_ = std::move(callback); }
  void setState(RankState state) {
    std::lock_guard lock(mutex_);
    progress_.state = state;
  }
  void setPhase(std::string phase) {
    std::lock_guard lock(mutex_);
    progress_.phase = std::move(phase);
  }
  Progress snapshot() const {
    std::lock_guard lock(mutex_);
    return progress_;
  }

 private:
  mutable std::mutex mutex_;
  Progress progress_;
  std::function<void()> onFirstStep_;
};

}  // namespace ds::worker
