// Slot claiming, packing and the group-name table behind CollectiveTracker.
#include "runtime/comm/collective_tracker.h"

#include <algorithm>
#include <mutex>

namespace ds::runtime {
namespace {

constexpr uint32_t kMaxGroups = 1u << 16;
constexpr uint64_t kMsMask = (uint64_t{1} << 40) - 1;

// Names are never freed (a job has a handful of group names, made once); id 0 is "".
struct GroupNames {
  std::mutex mutex;  // taken when a name is added or looked up, never during an op
  std::vector<std::string> names{""};
};

GroupNames& groupNames() {
  static GroupNames* table = new GroupNames;  // leaked: communicators may outlive static teardown
  return *table;
}

// The innermost tracked Scope's tracker on this thread: a Scope under it is nested.
thread_local const CollectiveTracker* tOpenTracker = nullptr;

uint64_t pack(CollectiveOp op, uint32_t group, uint64_t ms) {
  return (static_cast<uint64_t>(op) + 1) << 56 | static_cast<uint64_t>(group & 0xffff) << 40 |
         (ms & kMsMask);
}

}  // namespace

CollectiveTracker::CollectiveTracker() : epoch_(std::chrono::steady_clock::now()) {
  for (auto& slot : slots_) slot.store(0, std::memory_order_relaxed);
}

CollectiveTracker& CollectiveTracker::process() {
  static CollectiveTracker* tracker = new CollectiveTracker;  // leaked, as groupNames()
  return *tracker;
}

uint32_t CollectiveTracker::internGroup(const std::string& name) {
  GroupNames& table = groupNames();
  std::lock_guard lock(table.mutex);
  const auto found = std::find(table.names.begin(), table.names.end(), name);
  if (found != table.names.end()) return static_cast<uint32_t>(found - table.names.begin());
  if (table.names.size() >= kMaxGroups) return 0;  // unnamed rather than a wrong name
  table.names.push_back(name);
  return static_cast<uint32_t>(table.names.size() - 1);
}

std::string CollectiveTracker::groupName(uint32_t id) {
  GroupNames& table = groupNames();
  std::lock_guard lock(table.mutex);
  return id < table.names.size() ? table.names[id] : std::string();
}

CollectiveTracker::Scope::Scope(CollectiveTracker& tracker, CollectiveOp op, uint32_t group)
    : tracker_(&tracker) {
  if (tOpenTracker == &tracker) return;  // nested: the outer op stays the one reported
  const uint64_t ms = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                std::chrono::steady_clock::now() - tracker.epoch_)
                                                .count());
  const uint64_t value = pack(op, group, ms);
  for (size_t i = 0; i < kSlots; ++i) {
    uint64_t expected = 0;
    if (tracker.slots_[i].compare_exchange_strong(expected, value, std::memory_order_release,
                                                  std::memory_order_relaxed)) {
      slot_ = static_cast<int>(i);
      outerOpen_ = tOpenTracker;
      tOpenTracker = &tracker;
      return;
    }
  }
}

CollectiveTracker::Scope::~Scope() {
  if (slot_ < 0) return;
  tracker_->slots_[slot_].store(0, std::memory_order_release);
  tOpenTracker = outerOpen_;
}

std::vector<ActiveCollective> CollectiveTracker::active() const {
  std::vector<uint64_t> values;
  for (const auto& slot : slots_)
    if (const uint64_t value = slot.load(std::memory_order_acquire); value != 0)
      values.push_back(value);
  std::sort(values.begin(), values.end(),
            [](uint64_t a, uint64_t b) { return (a & kMsMask) < (b & kMsMask); });
  std::vector<ActiveCollective> result;
  for (const uint64_t value : values) {
    ActiveCollective one;
    one.op = static_cast<CollectiveOp>((value >> 56) - 1);
    one.group = groupName(static_cast<uint32_t>(value >> 40 & 0xffff));
    one.since = epoch_ + std::chrono::milliseconds(value & kMsMask);
    result.push_back(std::move(one));
  }
  return result;
}

std::optional<ActiveCollective> CollectiveTracker::longest() const {
  std::vector<ActiveCollective> all = active();
  if (all.empty()) return std::nullopt;
  return std::move(all.front());
}

}  // namespace ds::runtime
