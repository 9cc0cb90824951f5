// ParamSwapper: offload_param nvme (stage 3). Each swapped layer's shard of the working parameters
// ("group") lives in the swap file; a gather reads it into one of `slotCount` resident buffers of
// `slotBytes` each (DeepSpeed's offload_param.buffer_count and buffer_size), ideally started ahead
// of use by prefetch, and all-gathers from there. A group stays in its slot, clean, until the slot
// is wanted for another one (the group needed farthest off goes: chooseSlot), so a backward that
// follows its forward closely, or a step that follows its backward, reads nothing again.
// The optimizer step updates a group in its slot itself (acquireForUpdate, writeBack). The homes
// (the working copy's own arrays) hold a group's values only while a checkpoint reads or writes
// it, group by group: swapIn copies one group into its home (from its slot where it still is,
// which is then free), markWritten declares a home that will be rewritten whole (nothing is
// read), swapOut writes one home through a slot and gives its pages back while the caller goes
// on; swapInAll / swapOutAll do every group, the latter last group first so that the slots end
// holding the first layers for the next forward.
// Why slots: pages given back and touched again cost a page fault each (slot_swapper.h says how
// much); slots are touched once and stay resident.
// Thread-safe: prefetch runs on the caller's thread, acquire/release on the communication queue's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/offload/io_pool.h"
#include "runtime/offload/swap_file.h"

namespace ds::runtime {

class ParamSwapper {
 public:
  // Arguments: SwapFile's; `slotBytes` must hold the largest group (the caller refuses a config
  // that cannot); `lockSlots`: pin_memory, the slots' pages locked (mlock) so they never swap.
  ParamSwapper(const AioConfig& aio, const std::string& directory, int rank, uint64_t reserveBytes,
               int slotCount, size_t slotBytes, bool lockSlots);
  ~ParamSwapper();
  ParamSwapper(const ParamSwapper&) = delete;
  ParamSwapper& operator=(const ParamSwapper&) = delete;

  // Bytes a group of `bytes` takes in the file.
  static uint64_t fileBytesFor(size_t bytes);

  // The next group's home, resident and initialised: written to the file, then given back.
  size_t addGroup(SwapRegion home);
  size_t groupCount() const { return groups_.size(); }

  // Starts reading group g into a slot unless it is in one already; false when no slot can take
  // it without dropping a group that is in use or was read ahead and not used yet.
  bool prefetch(size_t g);
  // The same for the optimizer step's own reads ahead (not counted in readsAhead, which counts
  // the gathers' prefetch, stage3_prefetch_bucket_size's).
  bool prefetchForStep(size_t g) { return readAhead(g, false); }
  // Group g's bytes in its slot, read first if needed; valid until release(g).
  const char* acquire(size_t g);
  void release(size_t g);

  // The optimizer step's use of group g in its buffer itself, the home never touched: read in
  // first where `read` (an fp32 master the update reads), or taken as it is where the caller will
  // write every byte (a 16-bit copy); held until writeBack(g), which writes the buffer to the file
  // in the background (finishWrites collects it) and leaves it holding g, clean.
  char* acquireForUpdate(size_t g, bool read);
  void writeBack(size_t g);

  // One group's home: read in (a no-op when in already); declared about to be rewritten whole
  // (its copies in the slots and file are stale from now); written out through a slot (the write
  // runs on in the background: finishWrites or swapOutAll collects it) and its pages given back.
  void swapIn(size_t g);
  void markWritten(size_t g);
  void swapOut(size_t g);
  void dropHome(size_t g);  // its pages given back without a write (the home is unchanged)
  bool homeIn(size_t g) const;
  void finishWrites();  // every write landed; the first write error is thrown here

  void swapInAll();         // every group into its home (checkpoints)
  void markHomesWritten();  // the caller rewrote every home: swapOutAll must write them all
  void swapOutAll();        // every home in written out, pages given back, writes finished
  void dropHomes();         // the homes' pages given back without a write (they are unchanged)

  // What the swapper did so far, for tests and benchmarks.
  struct Counters {
    uint64_t reads = 0, bytesRead = 0, bytesWritten = 0;
    uint64_t readsAhead = 0;   // reads started by prefetch() (the stage's reads ahead)
    uint64_t hits = 0;         // acquires that found their group in a slot (read or reading)
    int maxReadsInFlight = 0;  // reads running at once, at most
    uint64_t maxHomeBytesIn = 0;  // the homes' bytes holding values at once, at most
  };
  Counters counters() const;
  // The gathers' order from now on: +1 ascending (a forward), -1 descending (a backward); which
  // buffers a read takes depends on it (chooseSlot).
  void setScanDirection(int direction);
  // Groups in a slot now (read or being read), in slot order.
  std::vector<size_t> slotGroups() const;
  int slotCount() const { return static_cast<int>(slots_.size()); }
  size_t slotBytes() const { return slotBytes_; }
  bool slotsLocked() const;
  size_t allocatedBytes() const;  // of the buffers made so far (each is made when first needed)
  size_t fileBytes() const { return file_.usedBytes(); }
  const char* engineName() const { return file_.engineName(); }

 private:
  struct Group {
    SwapRegion home;
    uint64_t fileOffset;
    size_t fileBytes;  // the home's bytes rounded up to whole pages
    bool homeIn = false;  // the home holds the values (the file may be stale)
  };
  struct Slot {
    std::unique_ptr<AlignedBuffer> buffer;  // allocated when first needed
    long group = -1;                        // -1: none
    int pins = 0;                           // acquires not yet released
    bool used = false;  // acquired since its read: may be dropped for a read ahead
    std::shared_future<void> io;  // its transfer in flight, if any
    uint64_t ioSerial = 0;        // transfers started on it so far
  };
  static bool ioRunning(const Slot& slot);
  bool readAhead(size_t g, bool counted);  // prefetch; counted: in readsAhead
  long slotOf(size_t g) const { return groupSlot_[g]; }
  // A slot for group `g`'s transfer, or -1: a free one first, else the group whose next use is
  // farthest off, for a scan over the groups in `direction` (+1: ascending) now at `g`. Groups
  // behind the scan come next in the reverse scan that follows (a backward after its forward,
  // the step's ascending pass after a backward), farthest behind last: they go first, the
  // farthest behind first; then those ahead, the farthest ahead first. (Least recently used would
  // drop, on every scan, the very group the scan needs next.) `evenUnused` lets a read ahead
  // that was never used be dropped too (acquire must succeed).
  long chooseSlot(bool evenUnused, size_t g, int direction) const;
  // Under mutex_: slot s made g's (its buffer allocated if new, its old group's mapping cleared);
  // its buffer.
  char* claimSlot(long s, size_t g);
  // Under mutex_: waitIo with the slot pinned, so no read ahead takes it meanwhile; still pinned
  // after (the caller unpins), unpinned if the transfer failed.
  void waitIoPinned(std::unique_lock<std::mutex>& lock, long s);
  void startRead(size_t g, long s);   // under mutex_
  void startWrite(size_t g, long s);  // under mutex_: slot s's buffer to g's place in the file
  void waitIo(std::unique_lock<std::mutex>& lock, long s);
  void clearSlots();  // every slot empty, after its I/O
  void forgetSlotCopy(std::unique_lock<std::mutex>& lock, size_t g);  // g's slot now free
  void writeOut(std::unique_lock<std::mutex>& lock, size_t g, long s);  // home -> slot s -> file
  void setHomeIn(Group& group, bool in);  // under mutex_: the flag and the bytes counted in

  SwapFile file_;
  std::vector<Group> groups_;
  std::vector<long> groupSlot_;  // per group: its slot or -1
  size_t slotBytes_;
  std::vector<Slot> slots_;
  const bool lockSlots_;
  mutable std::mutex mutex_;
  int direction_ = 1;
  int readsInFlight_ = 0;
  uint64_t homeBytesIn_ = 0;
  Counters counters_;
  // Last: destroyed first, so that its threads are joined while the file and slots still exist.
  IoPool io_;
};

}  // namespace ds::runtime
