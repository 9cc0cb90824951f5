// SlotSwapper: offload_optimizer nvme. Each optimizer sub-group's arrays (the fp32 master slice of
// a 16-bit model, then the optimizer's state arrays) live in the swap file, and each step streams
// them through `slotCount` resident buffers, "slots" (DeepSpeed's buffer_count): acquire(g) waits
// for group g's read into slot g % slotCount and starts reading g + 1 into the next slot; the
// caller updates the group where it lies in the slot (the optimizer bound to it); release(g) starts
// writing it back from there. endStep starts reading group 0 for the next step, overlapped with
// the forward and backward passes. A group still in its slot from the last step is not read again.
//
// Why slots rather than the arrays' own pages (as PageSwapper does for parameters): pages given
// back to the OS and touched again cost a page fault each, and in a paravirtualised guest with
// shadow page tables (the CI machines: PVM) that is ~15 us per 4 KiB, more than the I/O of the
// page. Slots are touched once and stay resident, so a step faults in nothing.
//
// The arrays' own storage ("homes") holds the values only around checkpoints: addGroup writes a
// group and gives the homes' pages back; swapInAll reads every group into its homes, swapOutAll
// writes them out again and gives the pages back. In a slot, and so in the file, a group's arrays
// lie one after the other, each on a 64-byte boundary and staggered by a few cache lines so that
// the optimizer's streams at the same index never share a cache set; a group is one transfer.
// Transfers run on the swapper's own I/O threads (one per slot up to 8, made once): a slot has at
// most one transfer in flight, and a new one on it starts only after the last one was waited for.
// Not thread-safe: the engine's step and checkpoints call it from one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <future>
#include <string>
#include <vector>

#include "runtime/offload/io_pool.h"
#include "runtime/offload/swap_file.h"

namespace ds::runtime {

class SlotSwapper {
 public:
  // Arguments: SwapFile's, and the number of slots (>= 1; 3 overlap a read, an update and a
  // write). `reserveBytes`: groupBytes() summed over the groups to come.
  SlotSwapper(const AioConfig& aio, const std::string& directory, int rank, uint64_t reserveBytes,
              std::string what, const std::string& stem, int slotCount);
  ~SlotSwapper();
  SlotSwapper(const SlotSwapper&) = delete;
  SlotSwapper& operator=(const SlotSwapper&) = delete;

  // Bytes a group of arrays of these sizes takes in a slot and in the file.
  static size_t groupBytes(const std::vector<size_t>& regionBytes);

  // The next group's homes, resident and initialised: written to the file, then given back.
  size_t addGroup(const std::vector<SwapRegion>& homes);
  // The same, but `fill` writes the group's initial values straight into its slot (region i at
  // at[i]) and the homes are never touched: a group created in place, as zero.Init does.
  size_t addGroup(const std::vector<SwapRegion>& homes,
                  const std::function<void(const std::vector<void*>& at)>& fill);
  size_t groupCount() const { return groups_.size(); }

  // Group g's arrays in its slot, in addGroup's order, valid until release(g).
  const std::vector<void*>& acquire(size_t g);
  void release(size_t g);
  void endStep();

  void swapInAll();   // every group into its homes (checkpoints)
  void swapOutAll();  // every group from its homes to the file, then the homes given back

  size_t fileBytes() const { return file_.usedBytes(); }
  // Bytes moved by acquire/release/endStep so far (a group still in its slot is not read).
  uint64_t bytesRead() const { return bytesRead_; }
  uint64_t bytesWritten() const { return bytesWritten_; }
  size_t slotBytes() const { return slotBytes_; }
  int slotCount() const { return static_cast<int>(slotGroup_.size()); }
  const char* engineName() const { return file_.engineName(); }

 private:
  struct Group {
    std::vector<SwapRegion> homes;
    std::vector<size_t> offsets;  // of each array in the slot
    size_t bytes;                 // in the slot and the file (whole pages)
    uint64_t fileOffset;
  };
  static std::vector<size_t> layout(const std::vector<size_t>& regionBytes, size_t& total);
  size_t slotOf(size_t g) const { return g % slotGroup_.size(); }
  char* slot(size_t s);                 // allocated when first needed, slotBytes_ each
  void waitSlot(size_t s);              // the slot's read or write in flight, if any
  void startRead(size_t g);             // into its slot, once the slot's last write is done
  void writeFromSlot(size_t g);         // blocking

  SwapFile file_;
  std::vector<Group> groups_;
  size_t slotBytes_ = 0;                 // the largest group
  std::vector<AlignedBuffer> slots_;     // created in index order up to slotCount
  std::vector<long> slotGroup_;          // the group a slot holds (or is reading); -1: none
  std::vector<std::future<void>> slotIo_;
  std::vector<void*> acquired_;
  uint64_t bytesRead_ = 0, bytesWritten_ = 0;
  // Last: destroyed first, so that its threads are joined while the file and slots still exist.
  IoPool io_;
};

}  // namespace ds::runtime
