// OptimizerStateHome: where the optimizer's sub-groups live between steps (their fp32 master slice,
// where the master is a copy of its own, and their state arrays): the offload_optimizer axis of a
// ZeRO stage's strategy (the stage owns it; offload_param is stage 3's own). Two kinds, chosen by
// make(): resident (device none or cpu: the master stays in the stage, the states in the
// optimizers, nothing moves) and nvme (a swap file, streamed through resident slots by
// runtime/offload/slot_swapper.h). The engine calls both the same way and never asks which it has.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/config/ds_config.h"
#include "runtime/optim/optimizer.h"
#include "runtime/config/model_state_estimate.h"

namespace ds::runtime {

// What the master weights and optimizer states hold in memory, for the engine's check before it
// allocates (common/memory_budget.h), with the words its error message needs.
struct StateFootprint {
  double bytes = 0;    // resident: master + states; nvme: the swap slots
  std::string where;   // appended to the message's breakdown ("" when resident)
  std::string advice;  // what to change when it does not fit, after "; "
};

class OptimizerStateHome {
 public:
  // From zero_optimization.offload_optimizer; `rank` names the swap file.
  static std::unique_ptr<OptimizerStateHome> make(const DeepSpeedConfig& config, int rank);
  virtual ~OptimizerStateHome() = default;

  // Setup, in this order. reserve: every group's length in elements, and the arrays each group
  // has (1 for a separate master slice, then one per optimizer state array).
  virtual void reserve(const std::vector<size_t>& groupElements, size_t regionsPerGroup) = 0;
  // The next group: its master slice (nullptr where the master is the working copy, which stays
  // where it is) of `elements`, and its optimizer, whose state exists and is initialised (fresh
  // zeros are written where the home keeps them, the optimizer's own arrays left untouched).
  // `fillMaster`, when given, writes the slice's initial values where the home keeps them (the
  // slice itself, or a swap slot: a streamed master is never resident whole); otherwise the slice
  // already holds them.
  virtual void addGroup(float* masterSlice, size_t elements, Optimizer& optimizer,
                        const std::function<void(float* out)>& fillMaster = {}) = 0;

  // The step, group by group in order. acquire binds group g's state to its optimizer and returns
  // where its master slice lies (masterSlice itself unless streamsMaster()), valid until release;
  // release unbinds it and starts its write-back; endStep, once the updated parameters were
  // published, waits for the write-backs and starts reading the next step's first group.
  virtual float* acquire(size_t g, float* masterSlice, Optimizer& optimizer) = 0;
  virtual void release(size_t g, Optimizer& optimizer) = 0;
  virtual void endStep() = 0;
  // Whether acquire may return the master slice somewhere else than its home (the 16-bit working
  // values must then be converted from there, group by group).
  virtual bool streamsMaster() const = 0;

  // Checkpoints: every group into its homes (the master slices and the optimizers' own arrays),
  // and back out after.
  virtual void swapInAll() = 0;
  virtual void swapOutAll() = 0;

  // nvme: the swap file's bytes, the bytes moved by steps so far, the I/O engine ("" / 0 resident).
  struct Traffic {
    uint64_t read = 0, written = 0;
  };
  virtual size_t fileBytes() const = 0;
  virtual Traffic traffic() const = 0;
  virtual std::string engineName() const = 0;
  // groups sub-groups, the largest of `largestGroup` elements; e and stateBytes (per parameter) as
  // for estimateModelState.
  virtual StateFootprint footprint(const ModelStateEstimate& e, double stateBytes, size_t groups,
                                   size_t largestGroup) const = 0;
};

}  // namespace ds::runtime
