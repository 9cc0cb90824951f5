#include "runtime/offload/slot_swapper.h"

#include <algorithm>
#include <cstring>

#include "common/error.h"

namespace ds::runtime {
namespace {

constexpr size_t kPage = AlignedBuffer::kAlignment;
// Array i of a group starts at i * kStagger modulo a page: ten cache lines apart, so that element
// j of every array maps to a different cache set (and no two streams alias at 4 KiB).
constexpr size_t kStagger = 640;
// A slot has at most one transfer in flight, so one thread per slot never queues one; past this
// many they would only queue for the same disk anyway.
constexpr int kMaxIoThreads = 8;

}  // namespace

SlotSwapper::SlotSwapper(const AioConfig& aio, const std::string& directory, int rank,
                         uint64_t reserveBytes, std::string what, const std::string& stem,
                         int slotCount)
    : file_(aio, directory, rank, reserveBytes, std::move(what), stem),
      io_(std::clamp(slotCount, 1, kMaxIoThreads)) {
  if (slotCount < 1)
    throw Error(file_.what() + ".buffer_count: " + std::to_string(slotCount) +
                " slots; at least 1 is needed (3 or more overlap reads, updates and writes)");
  slotGroup_.assign(static_cast<size_t>(slotCount), -1);
  slotIo_.resize(static_cast<size_t>(slotCount));
}

SlotSwapper::~SlotSwapper() {
  for (auto& io : slotIo_)
    if (io.valid()) io.wait();
}

std::vector<size_t> SlotSwapper::layout(const std::vector<size_t>& regionBytes, size_t& total) {
  std::vector<size_t> offsets;
  size_t end = 0;
  for (size_t i = 0; i < regionBytes.size(); ++i) {
    const size_t phase = i * kStagger % kPage;
    size_t at = end / kPage * kPage + phase;
    if (at < end) at += kPage;
    offsets.push_back(at);
    end = at + regionBytes[i];
  }
  total = (end + kPage - 1) / kPage * kPage;
  return offsets;
}

size_t SlotSwapper::groupBytes(const std::vector<size_t>& regionBytes) {
  size_t total = 0;
  layout(regionBytes, total);
  return total;
}

char* SlotSwapper::slot(size_t s) {
  while (slots_.size() <= s) slots_.emplace_back(slotBytes_);
  return static_cast<char*>(slots_[s].data());
}

void SlotSwapper::waitSlot(size_t s) {
  if (!slotIo_[s].valid()) return;
  try {
    slotIo_[s].get();
  } catch (...) {
    slotGroup_[s] = -1;  // its contents are unknown now
    throw;
  }
}

size_t SlotSwapper::addGroup(const std::vector<SwapRegion>& homes) {
  return addGroup(homes, [&](const std::vector<void*>& at) {
    for (size_t i = 0; i < homes.size(); ++i) std::memcpy(at[i], homes[i].data, homes[i].bytes);
  });
}

size_t SlotSwapper::addGroup(const std::vector<SwapRegion>& homes,
                             const std::function<void(const std::vector<void*>& at)>& fill) {
  Group group;
  group.homes = homes;
  std::vector<size_t> sizes;
  for (const SwapRegion& h : homes) sizes.push_back(h.bytes);
  group.offsets = layout(sizes, group.bytes);
  group.fileOffset = file_.allocate(group.bytes);
  if (group.bytes > slotBytes_) {  // slots grow to the largest group (before the first step)
    for (size_t s = 0; s < slotIo_.size(); ++s) waitSlot(s);
    slots_.clear();
    std::fill(slotGroup_.begin(), slotGroup_.end(), -1);
    slotBytes_ = group.bytes;
  }
  groups_.push_back(std::move(group));
  const size_t g = groups_.size() - 1, s = slotOf(g);
  waitSlot(s);
  char* at = slot(s);
  std::vector<void*> regions;
  for (size_t offset : groups_[g].offsets) regions.push_back(at + offset);
  fill(regions);
  slotGroup_[s] = static_cast<long>(g);
  writeFromSlot(g);
  for (const SwapRegion& h : homes) givePagesBack(h.data, h.bytes);
  return g;
}

void SlotSwapper::writeFromSlot(size_t g) {
  file_.write(slot(slotOf(g)), groups_[g].bytes, groups_[g].fileOffset);
}

void SlotSwapper::startRead(size_t g) {
  const size_t s = slotOf(g);
  if (slotGroup_[s] == static_cast<long>(g)) return;  // there already, or on its way
  waitSlot(s);  // the slot's last group is still being written
  char* at = slot(s);
  slotGroup_[s] = static_cast<long>(g);
  const size_t bytes = groups_[g].bytes;
  const uint64_t offset = groups_[g].fileOffset;
  bytesRead_ += bytes;
  slotIo_[s] = io_.submit([this, at, bytes, offset] { file_.read(at, bytes, offset); });
}

const std::vector<void*>& SlotSwapper::acquire(size_t g) {
  const size_t s = slotOf(g);
  startRead(g);
  waitSlot(s);
  if (g + 1 < groups_.size() && slotOf(g + 1) != s) startRead(g + 1);  // overlaps the update
  acquired_.clear();
  for (size_t offset : groups_[g].offsets) acquired_.push_back(slot(s) + offset);
  return acquired_;
}

void SlotSwapper::release(size_t g) {
  const size_t s = slotOf(g), bytes = groups_[g].bytes;
  const uint64_t offset = groups_[g].fileOffset;
  const char* at = slot(s);
  bytesWritten_ += bytes;
  slotIo_[s] = io_.submit([this, at, bytes, offset] { file_.write(at, bytes, offset); });
}

void SlotSwapper::endStep() {
  for (size_t s = 0; s < slotIo_.size(); ++s) waitSlot(s);
  if (!groups_.empty()) startRead(0);
}

void SlotSwapper::swapInAll() {
  for (size_t g = 0; g < groups_.size(); ++g) {
    const std::vector<void*>& at = acquire(g);
    const Group& group = groups_[g];
    for (size_t i = 0; i < group.homes.size(); ++i)
      std::memcpy(group.homes[i].data, at[i], group.homes[i].bytes);
  }
}

void SlotSwapper::swapOutAll() {
  for (size_t g = 0; g < groups_.size(); ++g) {
    const size_t s = slotOf(g);
    waitSlot(s);
    slotGroup_[s] = -1;  // until the homes' values are all in
    char* at = slot(s);
    const Group& group = groups_[g];
    for (size_t i = 0; i < group.homes.size(); ++i)
      std::memcpy(at + group.offsets[i], group.homes[i].data, group.homes[i].bytes);
    slotGroup_[s] = static_cast<long>(g);
    writeFromSlot(g);
    for (const SwapRegion& h : group.homes) givePagesBack(h.data, h.bytes);
  }
}

}  // namespace ds::runtime
