// ProgressBoard: the latest training progress, written by the job (and, as its observer, by the
// training loop) and read by the heartbeat thread, with the collective the process's
// communicators are in at that moment.
#pragma once

#include <functional>
#include <mutex>
#include <string>

#include "runtime/comm/collective_tracker.h"
#include "runtime/train/training_observer.h"
#include "worker/coordinator_client.h"

namespace ds::worker {

class ProgressBoard final : public runtime::TrainingObserver {
 public:
  void update(const Progress& progress) {
    bool first = false;
    {
      std::lock_guard lock(mutex_);
      first = progress_.step == 0 && progress.step > 0;
      progress_ = progress;
    }
    if (first && onMilestone_) onMilestone_();
  }
  // Called when the state changes and when the first step is done: the heartbeat goes out at
  // once, so that ds-launch sees the job's start-up and its phases to the millisecond, not at the
  // next interval.
  void onMilestone(std::function<void()> callback) { onMilestone_ = std::move(callback); }
  void setState(RankState state) {
    bool changed = false;
    {
      std::lock_guard lock(mutex_);
      changed = progress_.state != state;
      progress_.state = state;
    }
    if (changed && onMilestone_) onMilestone_();
  }
  void setPhase(std::string phase) {
    std::lock_guard lock(mutex_);
    progress_.phase = std::move(phase);
  }
  void trainingStarted() override { setState(RankState::Training); }
  void phaseChanged(const std::string& phase) override { setPhase(phase); }
  void stepDone(const runtime::StepDone& done) override {
    update({RankState::Training, done.steps, done.loss, done.samplesPerSecond, 0, done.phase});
  }
  // The collective comes from the process's communicators at this moment, not from the job.
  Progress snapshot() const {
    Progress progress;
    {
      std::lock_guard lock(mutex_);
      progress = progress_;
    }
    if (auto in = runtime::CollectiveTracker::process().longest())
      progress.collective = CollectiveWait{in->op, std::move(in->group), in->since};
    return progress;
  }

 private:
  mutable std::mutex mutex_;
  Progress progress_;
  std::function<void()> onMilestone_;
};

}  // namespace ds::worker
