// CollectiveTracker: which collectives this process's threads are in right now (op, group, since
// when), written by Communicator as each op starts and ends and read by the worker's heartbeat.
// An op's start and end are one atomic store each and never lock; a reader loads the slots and
// looks their group names up in a table that no op touches.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/collective_op.h"

namespace ds::runtime {

struct ActiveCollective {
  CollectiveOp op = CollectiveOp::AllReduce;
  std::string group;  // the communicator's group name ("world", "ranks 0,2"); empty: unnamed
  std::chrono::steady_clock::time_point since;
};

class CollectiveTracker {
 public:
  // Threads that may be in a collective at once; an op past that is not tracked.
  static constexpr size_t kSlots = 64;

  CollectiveTracker();
  CollectiveTracker(const CollectiveTracker&) = delete;
  CollectiveTracker& operator=(const CollectiveTracker&) = delete;

  // The one every Communicator of this process records into.
  static CollectiveTracker& process();

  // A process-lifetime id for a group name, for Scope: ids are what a slot holds, so a name
  // outlives the communicator that had it and a reader never touches freed memory.
  static uint32_t internGroup(const std::string& name);
  static std::string groupName(uint32_t id);

  // One op, from construction to destruction. Only a thread's outermost op is recorded: the op
  // its caller issued (a hierarchical all_reduce, not the shared-memory broadcast inside it),
  // since the moment it was issued.
  class Scope {
   public:
    Scope(CollectiveTracker& tracker, CollectiveOp op, uint32_t group);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    CollectiveTracker* tracker_;
    int slot_ = -1;  // -1: nested in another op of this thread, or no slot was free
    const CollectiveTracker* outerOpen_ = nullptr;  // this thread's open tracker before this op
  };

  // Every op in progress, the longest-running first.
  std::vector<ActiveCollective> active() const;
  // The op in progress that started first, if any: what a rank has waited in longest.
  std::optional<ActiveCollective> longest() const;

 private:
  // A slot packs op + 1 (8 bits; 0 = free), group id (16 bits) and start in ms after epoch_
  // (40 bits, 34 years).
  std::array<std::atomic<uint64_t>, kSlots> slots_;
  std::chrono::steady_clock::time_point epoch_;
};

}  // namespace ds::runtime
