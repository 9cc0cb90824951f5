// GPT-NeoX's checkpoint schedule: at which iterations a run saves (checkpoint-factor with
// checkpoint-scale linear or log, extra-save-iters, and always the last iteration), and how many
// checkpoints it keeps (keep-last-n-checkpoints). Pure functions; the training loop asks them, the
// checkpoint layer deletes (runtime/checkpoint/checkpoint_retention.h).
#pragma once

#include <cstdint>
#include <vector>

namespace ds::runtime {

enum class CheckpointScale { Linear, Log };

struct CheckpointSchedule {
  double factor = 0.0;  // checkpoint-factor; 0: none (NeoX's null), no periodic saves
  CheckpointScale scale = CheckpointScale::Linear;
  std::vector<int64_t> extraSaveIters;  // sorted, without repeats, each >= 0
  int64_t keepLast = 0;                 // keep-last-n-checkpoints; 0: keep every checkpoint

  bool periodic() const { return factor > 0.0; }
};

// Throws ds::Error naming the key and the fix: linear needs a whole factor, log one above 1
// (NeoX asserts both when it first saves; here a config fails before any rank starts).
void validateCheckpointSchedule(const CheckpointSchedule& schedule);

// Whether NeoX saves after `iteration` of a run of `trainIters` iterations: an extra-save-iters
// entry (0 means before the first iteration, when the run starts from 0), a multiple of the factor
// (linear), int(factor^k) for k >= 0 by repeated multiplication as NeoX does (log: so 1 is one),
// or the last iteration, which NeoX saves after training whatever the schedule.
bool isNeoxSaveIteration(const CheckpointSchedule& schedule, int64_t iteration, int64_t trainIters);

// Every iteration isNeoxSaveIteration accepts in [0, trainIters], ascending, each once. Its size
// is about trainIters / factor for a linear schedule: for printing and tests, not the loop.
std::vector<int64_t> neoxSaveIterations(const CheckpointSchedule& schedule, int64_t trainIters);

}  // namespace ds::runtime
