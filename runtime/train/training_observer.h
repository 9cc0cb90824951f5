// Who watches the training loop (runtime/train/training_loop.h) without being part of it: the
// worker's progress board that the heartbeat reads, the monitors, a benchmark's timers. The loop
// calls every observer at the same points on every rank; an observer must not use collectives.
#pragma once

#include <cstdint>
#include <string>

namespace ds::runtime {

class Engine;

// A finished step, with the engine that ran it (its counters already advanced).
struct StepDone {
  int64_t steps = 0;  // done so far, counted from 1
  double loss = 0.0;  // the step's mean loss, averaged over the loss group when there is one
  double samplesPerSecond = 0.0;
  std::string phase;  // "iteration 3 done"
  const Engine& engine;
};

class TrainingObserver {
 public:
  virtual ~TrainingObserver() = default;
  virtual void trainingStarted() {}
  // What the rank does now ("iteration 3: saving checkpoint"). The launcher's stall report treats
  // a phase naming a collective ("all_reduce") as waiting for peers.
  virtual void phaseChanged(const std::string& /*phase*/) {}
  virtual void stepDone(const StepDone& /*done*/) {}
};

}  // namespace ds::runtime
