// Slice maps: pieces expanded from the strided runs, then a merge by full index of the two sides'
// pieces (each side's pieces sorted by full index, which Megatron's slices already are).
#include "common/slice_map.h"

#include <algorithm>

#include "common/error.h"

namespace ds {
namespace {

// A contiguous stretch: full elements [full, full + count) are local [local, local + count).
struct Piece {
  uint64_t full, local, count;
};

// The pieces of local elements [begin, end), sorted by full index.
std::vector<Piece> piecesOf(const SliceMap& map, uint64_t begin, uint64_t end) {
  std::vector<Piece> pieces;
  if (begin >= end) return pieces;
  if (map.whole()) return {{begin, begin, end - begin}};
  uint64_t local = 0;
  for (const StridedRun& run : map.runs) {
    const uint64_t runEnd = local + run.count * run.repeat;
    if (runEnd > begin && local < end) {
      // Only the repeats that meet [begin, end).
      const uint64_t first = begin > local ? (begin - local) / run.count : 0;
      for (uint64_t i = first; i < run.repeat; ++i) {
        const uint64_t lo = local + i * run.count, hi = lo + run.count;
        if (lo >= end) break;
        const uint64_t a = std::max(lo, begin), b = std::min(hi, end);
        if (a < b) pieces.push_back({run.fullBegin + i * run.stride + (a - lo), a, b - a});
      }
    }
    local = runEnd;
  }
  std::sort(pieces.begin(), pieces.end(),
            [](const Piece& x, const Piece& y) { return x.full < y.full; });
  return pieces;
}

}  // namespace

uint64_t SliceMap::localNumel() const {
  if (whole()) return fullNumel;
  uint64_t n = 0;
  for (const StridedRun& run : runs) n += run.count * run.repeat;
  return n;
}

std::vector<SliceCopy> sliceOverlaps(const SliceMap& to, uint64_t toBegin, uint64_t toEnd,
                                     const SliceMap& from, uint64_t fromBegin, uint64_t fromEnd) {
  if (to.fullNumel != from.fullNumel)
    throw Error("tensor slices of different tensors: " + std::to_string(to.fullNumel) + " and " +
                std::to_string(from.fullNumel) + " elements in full");
  const std::vector<Piece> a = piecesOf(to, toBegin, toEnd), b = piecesOf(from, fromBegin, fromEnd);
  std::vector<SliceCopy> copies;
  for (size_t i = 0, j = 0; i < a.size() && j < b.size();) {
    const uint64_t lo = std::max(a[i].full, b[j].full);
    const uint64_t hi = std::min(a[i].full + a[i].count, b[j].full + b[j].count);
    if (lo < hi) copies.push_back({a[i].local + (lo - a[i].full), b[j].local + (lo - b[j].full), hi - lo});
    if (a[i].full + a[i].count < b[j].full + b[j].count)
      ++i;
    else
      ++j;
  }
  std::sort(copies.begin(), copies.end(),
            [](const SliceCopy& x, const SliceCopy& y) { return x.toLocal < y.toLocal; });
  return copies;
}

void checkSliceMap(const SliceMap& map, uint64_t localNumel, const std::string& what) {
  auto fail = [&](const std::string& problem) { throw Error(what + ": " + problem); };
  std::vector<std::pair<uint64_t, uint64_t>> spans;  // full [begin, end) of every repeat
  for (size_t r = 0; r < map.runs.size(); ++r) {
    const StridedRun& run = map.runs[r];
    const std::string name = "run " + std::to_string(r);
    if (run.count == 0 || run.repeat == 0) fail(name + " is empty");
    if (run.repeat > 1 && run.stride < run.count) fail(name + "'s repeats overlap (stride below count)");
    const uint64_t last = run.fullBegin + (run.repeat - 1) * run.stride;
    if (run.repeat > 1 && (last - run.fullBegin) / (run.repeat - 1) != run.stride)
      fail(name + " overflows");
    if (last < run.fullBegin || last + run.count < last || last + run.count > map.fullNumel)
      fail(name + " leaves the tensor's " + std::to_string(map.fullNumel) + " elements");
    for (uint64_t i = 0; i < run.repeat; ++i)
      spans.push_back({run.fullBegin + i * run.stride, run.fullBegin + i * run.stride + run.count});
  }
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i)
    if (spans[i].first < spans[i - 1].second) fail("runs overlap");
  if (map.localNumel() != localNumel)
    fail("the runs hold " + std::to_string(map.localNumel()) + " elements, the tensor " +
         std::to_string(localNumel));
}

}  // namespace ds
