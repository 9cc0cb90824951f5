// ProgressBoard: the latest training progress, written by the job and read by the heartbeat thread.
#pragma once

#include <mutex>
#include <string>

#include "worker/coordinator_client.h"

namespace ds::worker {

class ProgressBoard {
 public:
  void update(const Progress& progress) {
    std::lock_guard lock(mutex_);
    progress_ = progress;
  }
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
};

}  // namespace ds::worker
