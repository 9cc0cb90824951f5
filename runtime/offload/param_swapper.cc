#include "runtime/offload/param_swapper.h"

#include <algorithm>
#include <cstring>

#include "common/error.h"

namespace ds::runtime {
namespace {

constexpr uint64_t kPage = AlignedBuffer::kAlignment;
// One read per slot at a time; past this many threads they would only queue for the same disk.
constexpr int kMaxIoThreads = 8;

}  // namespace

ParamSwapper::ParamSwapper(const AioConfig& aio, const std::string& directory, int rank,
                           uint64_t reserveBytes, int slotCount, size_t slotBytes, bool lockSlots)
    : file_(aio, directory, rank, reserveBytes, "offload_param", "param"),
      slotBytes_((slotBytes + kPage - 1) / kPage * kPage),
      slots_(static_cast<size_t>(std::max(slotCount, 1))),
      lockSlots_(lockSlots),
      io_(std::clamp(slotCount, 1, kMaxIoThreads)) {
  if (slotCount < 1)
    throw Error("offload_param.buffer_count: " + std::to_string(slotCount) +
                " buffers; at least 1 is needed (2 or more read the next layer during a gather)");
}

ParamSwapper::~ParamSwapper() {
  for (Slot& slot : slots_)
    if (slot.io.valid()) slot.io.wait();
}

uint64_t ParamSwapper::fileBytesFor(size_t bytes) { return (bytes + kPage - 1) / kPage * kPage; }

size_t ParamSwapper::addGroup(SwapRegion home) {
  std::unique_lock lock(mutex_);
  Group group{home, 0, fileBytesFor(home.bytes)};
  if (group.fileBytes > slotBytes_)
    throw Error("offload_param: a layer shard of " + std::to_string(home.bytes) +
                " bytes is larger than the " + std::to_string(slotBytes_) +
                "-byte buffers (a bug: the stage checks buffer_size first)");
  group.fileOffset = file_.allocate(group.fileBytes);
  groups_.push_back(group);
  groupSlot_.push_back(-1);
  // Through slot 0 (pages past the home's end are zeros in the file).
  waitIo(lock, 0);
  if (slots_[0].group >= 0) groupSlot_[static_cast<size_t>(slots_[0].group)] = -1;
  slots_[0].group = -1;
  if (!slots_[0].buffer) slots_[0].buffer = std::make_unique<AlignedBuffer>(slotBytes_, lockSlots_);
  char* at = static_cast<char*>(slots_[0].buffer->data());
  std::memcpy(at, home.data, home.bytes);
  std::memset(at + home.bytes, 0, group.fileBytes - home.bytes);
  file_.write(at, group.fileBytes, group.fileOffset);
  givePagesBack(home.data, home.bytes);
  return groups_.size() - 1;
}

long ParamSwapper::chooseSlot(bool evenUnused, size_t g, int direction) const {
  const auto behind = static_cast<long>(groups_.size()) + 1;  // any group behind ranks first
  long best = -1, bestRank = -1;
  for (size_t s = 0; s < slots_.size(); ++s) {
    const Slot& slot = slots_[s];
    if (slot.group < 0) return static_cast<long>(s);
    if (slot.pins > 0 || (!evenUnused && (!slot.used || ioRunning(slot)))) continue;
    const long ahead = (slot.group - static_cast<long>(g)) * direction;
    const long rank = ahead >= 0 ? ahead : behind - ahead;
    if (rank > bestRank) {
      best = static_cast<long>(s);
      bestRank = rank;
    }
  }
  return best;
}

void ParamSwapper::setScanDirection(int direction) {
  std::lock_guard lock(mutex_);
  direction_ = direction < 0 ? -1 : 1;
}

char* ParamSwapper::claimSlot(long s, size_t g) {
  Slot& slot = slots_[static_cast<size_t>(s)];
  if (slot.group >= 0) groupSlot_[static_cast<size_t>(slot.group)] = -1;
  if (!slot.buffer) slot.buffer = std::make_unique<AlignedBuffer>(slotBytes_, lockSlots_);
  slot.group = static_cast<long>(g);
  groupSlot_[g] = s;
  return static_cast<char*>(slot.buffer->data());
}

void ParamSwapper::waitIoPinned(std::unique_lock<std::mutex>& lock, long s) {
  Slot& slot = slots_[static_cast<size_t>(s)];
  slot.pins += 1;
  try {
    waitIo(lock, s);
  } catch (...) {
    slot.pins -= 1;
    throw;
  }
}

void ParamSwapper::startWrite(size_t g, long s) {
  Slot& slot = slots_[static_cast<size_t>(s)];
  const Group& group = groups_[g];
  counters_.bytesWritten += group.fileBytes;
  slot.ioSerial += 1;
  slot.io = io_.submit([this, at = static_cast<const char*>(slot.buffer->data()),
                        bytes = group.fileBytes, offset = group.fileOffset] {
                 file_.write(at, bytes, offset);
               })
                .share();
}

void ParamSwapper::startRead(size_t g, long s) {
  Slot& slot = slots_[static_cast<size_t>(s)];
  char* at = claimSlot(s, g);
  slot.used = false;
  const Group& group = groups_[g];
  counters_.reads += 1;
  counters_.bytesRead += group.fileBytes;
  counters_.maxReadsInFlight = std::max(counters_.maxReadsInFlight, ++readsInFlight_);
  slot.ioSerial += 1;
  slot.io = io_.submit([this, at, bytes = group.fileBytes, offset = group.fileOffset] {
                 struct Done {  // counted out however the read ends
                   ParamSwapper& swapper;
                   ~Done() {
                     std::lock_guard done(swapper.mutex_);
                     --swapper.readsInFlight_;
                   }
                 } done{*this};
                 file_.read(at, bytes, offset);
               })
                .share();
}

void ParamSwapper::waitIo(std::unique_lock<std::mutex>& lock, long s) {
  Slot& slot = slots_[static_cast<size_t>(s)];
  if (!slot.io.valid()) return;
  std::shared_future<void> io = slot.io;
  const uint64_t serial = slot.ioSerial;
  lock.unlock();
  io.wait();
  lock.lock();
  if (slot.ioSerial != serial) return;  // a later transfer replaced it: its waiter collects it
  slot.io = {};
  try {
    io.get();
  } catch (...) {
    if (slot.group >= 0) groupSlot_[static_cast<size_t>(slot.group)] = -1;
    slot.group = -1;  // its contents are unknown now
    throw;
  }
}

bool ParamSwapper::ioRunning(const Slot& slot) {
  return slot.io.valid() && slot.io.wait_for(std::chrono::seconds(0)) != std::future_status::ready;
}

bool ParamSwapper::prefetch(size_t g) { return readAhead(g, true); }

bool ParamSwapper::readAhead(size_t g, bool counted) {
  std::unique_lock lock(mutex_);
  if (slotOf(g) >= 0) return true;
  const long s = chooseSlot(false, g, direction_);
  if (s < 0) return false;
  waitIo(lock, s);  // finished already (chooseSlot): only collects a write's error
  if (counted) counters_.readsAhead += 1;
  startRead(g, s);
  return true;
}

const char* ParamSwapper::acquire(size_t g) {
  std::unique_lock lock(mutex_);
  long s = slotOf(g);
  bool hit = s >= 0;
  while (s < 0) {
    s = chooseSlot(true, g, direction_);
    if (s < 0)
      throw Error("offload_param: every one of the " + std::to_string(slots_.size()) +
                  " buffers is in use (a bug: gathers hold one at a time)");
    waitIoPinned(lock, s);  // a read ahead that is dropped, or a write, must land first
    slots_[static_cast<size_t>(s)].pins -= 1;
    if (slotOf(g) >= 0) {  // a read ahead of g started meanwhile: use that one
      s = slotOf(g);
      hit = true;
    } else {
      startRead(g, s);
    }
  }
  if (hit) counters_.hits += 1;
  waitIoPinned(lock, s);  // held until release(g)
  Slot& slot = slots_[static_cast<size_t>(s)];
  slot.used = true;
  return static_cast<const char*>(slot.buffer->data());
}

void ParamSwapper::release(size_t g) {
  std::lock_guard lock(mutex_);
  const long s = slotOf(g);
  if (s >= 0) slots_[static_cast<size_t>(s)].pins -= 1;
}

void ParamSwapper::setHomeIn(Group& group, bool in) {
  if (group.homeIn == in) return;
  group.homeIn = in;
  if (in) {
    homeBytesIn_ += group.home.bytes;
    counters_.maxHomeBytesIn = std::max(counters_.maxHomeBytesIn, homeBytesIn_);
  } else {
    homeBytesIn_ -= group.home.bytes;
  }
}

bool ParamSwapper::homeIn(size_t g) const {
  std::lock_guard lock(mutex_);
  return groups_[g].homeIn;
}

void ParamSwapper::forgetSlotCopy(std::unique_lock<std::mutex>& lock, size_t g) {
  const long s = slotOf(g);
  if (s < 0) return;
  Slot& slot = slots_[static_cast<size_t>(s)];
  if (slot.pins > 0)
    throw Error("offload_param: a buffer still in use when its layer's shard changes (a bug)");
  waitIo(lock, s);
  if (slot.group == static_cast<long>(g)) slot.group = -1;
  groupSlot_[g] = -1;
}

void ParamSwapper::swapIn(size_t g) {
  {
    std::lock_guard lock(mutex_);
    if (groups_[g].homeIn) return;
  }
  const char* at = acquire(g);
  std::memcpy(groups_[g].home.data, at, groups_[g].home.bytes);
  release(g);
  // Its buffer is the first to reuse: the home has the values now and will change, and a
  // least-recently-used choice would instead drop a group that is still to be read in.
  std::unique_lock lock(mutex_);
  forgetSlotCopy(lock, g);
  setHomeIn(groups_[g], true);
}

void ParamSwapper::markWritten(size_t g) {
  std::unique_lock lock(mutex_);
  forgetSlotCopy(lock, g);  // a read ahead of it lands first, and is then stale
  setHomeIn(groups_[g], true);
}

void ParamSwapper::writeOut(std::unique_lock<std::mutex>& lock, size_t g, long s) {
  Slot& slot = slots_[static_cast<size_t>(s)];
  waitIoPinned(lock, s);  // no read ahead takes it while its last transfer lands
  slot.pins -= 1;
  char* at = claimSlot(s, g);
  Group& group = groups_[g];
  std::memcpy(at, group.home.data, group.home.bytes);
  std::memset(at + group.home.bytes, 0, group.fileBytes - group.home.bytes);
  givePagesBack(group.home.data, group.home.bytes);
  setHomeIn(group, false);
  slot.used = false;
  startWrite(g, s);
}

void ParamSwapper::swapOut(size_t g) {
  std::unique_lock lock(mutex_);
  if (!groups_[g].homeIn) return;
  forgetSlotCopy(lock, g);
  // A buffer that is done with: a free one first, then one holding a finished write or an unpinned
  // read (the file has their groups: they can be read again).
  // The written copy is next wanted by the next forward, which starts from the first group: the
  // groups farthest from it go first.
  long s = chooseSlot(false, 0, 1);
  if (s < 0) s = chooseSlot(true, 0, 1);
  if (s < 0)
    throw Error("offload_param: every one of the " + std::to_string(slots_.size()) +
                " buffers is in use (a bug: the step holds none)");
  writeOut(lock, g, s);
  // Once written, the buffer may take a read ahead: the step goes on to later layers, and the
  // next forward starts from the first.
  slots_[static_cast<size_t>(s)].used = true;
}

void ParamSwapper::dropHome(size_t g) {
  std::lock_guard lock(mutex_);
  Group& group = groups_[g];
  if (!group.homeIn) return;
  givePagesBack(group.home.data, group.home.bytes);
  setHomeIn(group, false);
}

char* ParamSwapper::acquireForUpdate(size_t g, bool read) {
  if (read) return const_cast<char*>(acquire(g));
  std::unique_lock lock(mutex_);
  long s = slotOf(g);
  if (s < 0) s = chooseSlot(true, g, direction_);
  if (s < 0)
    throw Error("offload_param: every one of the " + std::to_string(slots_.size()) +
                " buffers is in use (a bug: the step holds one at a time)");
  waitIoPinned(lock, s);  // a read ahead of g, or the slot's last write, lands first; held
  char* at = claimSlot(s, g);
  slots_[static_cast<size_t>(s)].used = true;
  const Group& group = groups_[g];
  std::memset(at + group.home.bytes, 0, group.fileBytes - group.home.bytes);
  return at;
}

void ParamSwapper::writeBack(size_t g) {
  std::lock_guard lock(mutex_);
  const long s = slotOf(g);
  if (s < 0) throw Error("offload_param: a layer written back that holds no buffer (a bug)");
  Slot& slot = slots_[static_cast<size_t>(s)];
  slot.pins -= 1;
  slot.used = true;  // may take a read ahead once written: the file holds the group again
  startWrite(g, s);
}

void ParamSwapper::finishWrites() {
  std::unique_lock lock(mutex_);
  for (size_t s = 0; s < slots_.size(); ++s) waitIo(lock, static_cast<long>(s));
}

void ParamSwapper::swapInAll() {
  for (size_t g = 0; g < groups_.size(); ++g) {
    if (homeIn(g)) continue;
    // The next groups read while this one is copied: as many as free slots allow.
    for (size_t k = g + 1; k < groups_.size() && k <= g + slots_.size() - 1; ++k)
      if (!homeIn(k) && !readAhead(k, false)) break;
    swapIn(g);
  }
}

void ParamSwapper::markHomesWritten() {
  clearSlots();  // their copies are stale now
  std::lock_guard lock(mutex_);
  for (Group& group : groups_) setHomeIn(group, true);
}

void ParamSwapper::clearSlots() {
  std::unique_lock lock(mutex_);
  for (size_t s = 0; s < slots_.size(); ++s) {
    waitIo(lock, static_cast<long>(s));
    Slot& slot = slots_[s];
    if (slot.pins > 0)
      throw Error("offload_param: a buffer still in use when the shard changes (a bug)");
    if (slot.group >= 0) groupSlot_[static_cast<size_t>(slot.group)] = -1;
    slot.group = -1;
  }
}

void ParamSwapper::swapOutAll() {
  std::unique_lock lock(mutex_);
  // Last group first, round the slots: the first layers stay in them for the next forward. Each
  // write runs while the next group is copied into the next slot.
  size_t written = 0;
  for (size_t i = 0; i < groups_.size(); ++i) {
    const size_t g = groups_.size() - 1 - i;
    if (!groups_[g].homeIn) continue;
    forgetSlotCopy(lock, g);
    writeOut(lock, g, static_cast<long>(written++ % slots_.size()));
  }
  lock.unlock();
  // Every write done before the step ends: an I/O error stops the step that caused it.
  finishWrites();
}

void ParamSwapper::dropHomes() {
  std::lock_guard lock(mutex_);
  for (Group& group : groups_)
    if (group.homeIn) {
      givePagesBack(group.home.data, group.home.bytes);
      setHomeIn(group, false);
    }
}

ParamSwapper::Counters ParamSwapper::counters() const {
  std::lock_guard lock(mutex_);
  return counters_;
}

std::vector<size_t> ParamSwapper::slotGroups() const {
  std::lock_guard lock(mutex_);
  std::vector<size_t> out;
  for (const Slot& slot : slots_)
    if (slot.group >= 0) out.push_back(static_cast<size_t>(slot.group));
  return out;
}

size_t ParamSwapper::allocatedBytes() const {
  std::lock_guard lock(mutex_);
  size_t bytes = 0;
  for (const Slot& slot : slots_)
    if (slot.buffer) bytes += slot.buffer->size();
  return bytes;
}

bool ParamSwapper::slotsLocked() const {
  std::lock_guard lock(mutex_);
  bool any = false;
  for (const Slot& slot : slots_) {
    if (!slot.buffer) continue;
    if (!slot.buffer->locked()) return false;
    any = true;
  }
  return any;
}

}  // namespace ds::runtime
