#include "runtime/offload/page_swapper.h"

#include <algorithm>

namespace ds::runtime {

PageSwapper::PageSwapper(const AioConfig& aio, const std::string& directory, int rank,
                         uint64_t reserveBytes, std::string what, const std::string& stem)
    : file_(aio, directory, rank, reserveBytes, std::move(what), stem) {}

size_t PageSwapper::addGroup(const std::vector<Region>& regions) {
  std::vector<Piece> pieces;
  for (const Region& r : regions) {
    const SwapRegion pages = wholePages(r.data, r.bytes);
    if (pages.bytes == 0) continue;  // no whole page: it simply stays in memory
    pieces.push_back(
        {static_cast<char*>(pages.data), pages.bytes, file_.allocate(pages.bytes)});
  }
  pieces_.push_back(std::move(pieces));
  resident_.push_back(1);
  const size_t g = pieces_.size() - 1;
  for (const Piece& p : pieces_[g]) file_.write(p.at, p.bytes, p.offset);
  freePages(g);
  return g;
}

void PageSwapper::freePages(size_t g) {
  for (const Piece& p : pieces_[g]) givePagesBack(p.at, p.bytes);
  resident_[g] = 0;
}

void PageSwapper::fetch(size_t g) {
  if (resident_[g]) return;
  for (const Piece& p : pieces_[g]) file_.read(p.at, p.bytes, p.offset);
  resident_[g] = 1;
}

void PageSwapper::dropClean(size_t g) {
  if (resident_[g]) freePages(g);
}

void PageSwapper::swapOutAll() {
  for (size_t g = 0; g < pieces_.size(); ++g) {
    if (!resident_[g]) continue;
    for (const Piece& p : pieces_[g]) file_.write(p.at, p.bytes, p.offset);
    freePages(g);
  }
}

void PageSwapper::swapInAll() {
  for (size_t g = 0; g < pieces_.size(); ++g) fetch(g);
}

void PageSwapper::markAllResident() { std::fill(resident_.begin(), resident_.end(), 1); }

}  // namespace ds::runtime
