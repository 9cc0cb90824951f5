// PageSwapper: NVMe offload of arrays that keep their addresses (offload_param: each group is a
// layer's shard of the working parameters). Between uses a group's pages are in the swap file and
// given back to the OS (MADV_DONTNEED); fetch reads them back in place, right before the layer's
// all-gather; dropClean gives them back after it without a write (the file already holds them);
// after each optimizer step every group is written out once. Groups are added one at a time and
// swapped out at once, so the whole state is never resident, not even while it is built.
// Only the page-aligned interior of an array is swapped; its ragged ends stay in memory.
// Synchronous and not thread-safe: the stage calls it from its communication queue only.
// (offload_optimizer streams through resident slots instead: slot_swapper.h says why.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/offload/swap_file.h"

namespace ds::runtime {

class PageSwapper {
 public:
  using Region = SwapRegion;
  // Arguments: SwapFile's. `reserveBytes` covers the bytes of every region to come.
  PageSwapper(const AioConfig& aio, const std::string& directory, int rank, uint64_t reserveBytes,
              std::string what, const std::string& stem);

  // The regions of the next group, resident and initialised: written to the file, then their pages
  // are given back. Returns the group's index.
  size_t addGroup(const std::vector<Region>& regions);
  size_t groupCount() const { return pieces_.size(); }

  void fetch(size_t g);      // reads the group in unless it is resident
  void dropClean(size_t g);  // gives its pages back without writing (unmodified since written)
  void swapOutAll();         // writes every resident group, then gives its pages back
  void swapInAll();          // reads every swapped-out group (checkpoints, inspection)
  // The caller rewrote every byte of every group (given-back pages included): all count as
  // resident, so that swapOutAll writes them.
  void markAllResident();

  size_t fileBytes() const { return file_.usedBytes(); }
  const char* engineName() const { return file_.engineName(); }

 private:
  struct Piece {
    char* at;
    size_t bytes;
    uint64_t offset;  // in the swap file
  };
  void freePages(size_t g);

  SwapFile file_;
  std::vector<std::vector<Piece>> pieces_;
  std::vector<uint8_t> resident_;  // bytes, not vector<bool>'s shared bits
};

}  // namespace ds::runtime
