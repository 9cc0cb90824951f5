// Where one rank's slice of a tensor sits in the full (one-rank) tensor, in a form compact enough
// for a checkpoint manifest: strided runs of elements. A rank's local elements are the runs'
// elements in order (run 0's first repeat, its second, ..., then run 1). Megatron's slices are one
// run each way: a row chunk or a vocabulary range (repeat 1), a column chunk of [R, C] (repeat R,
// stride C), the fused QKV's q, k and v heads (three runs). What a checkpoint needs from it: the
// pieces two different slicings of a tensor have in common, to reshard at any model size.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ds {

// Elements [fullBegin + i * stride, + count) of the full tensor for i in [0, repeat).
struct StridedRun {
  uint64_t fullBegin = 0;
  uint64_t count = 0;
  uint64_t repeat = 1;
  uint64_t stride = 0;
  bool operator==(const StridedRun&) const = default;
};

struct SliceMap {
  uint64_t fullNumel = 0;
  std::vector<StridedRun> runs;  // empty: the whole tensor, in order
  bool whole() const { return runs.empty(); }
  uint64_t localNumel() const;
  bool operator==(const SliceMap&) const = default;
};

// A copy of `count` elements from local index `fromLocal` of one slicing to `toLocal` of another.
struct SliceCopy {
  uint64_t toLocal = 0;
  uint64_t fromLocal = 0;
  uint64_t count = 0;
  bool operator==(const SliceCopy&) const = default;
};

// The local elements [toBegin, toEnd) of `to` that local elements [fromBegin, fromEnd) of `from`
// hold (the same full elements), as copies in `to`'s local order. Both maps describe the same
// full tensor (fullNumel must agree; ds::Error otherwise).
std::vector<SliceCopy> sliceOverlaps(const SliceMap& to, uint64_t toBegin, uint64_t toEnd,
                                     const SliceMap& from, uint64_t fromBegin, uint64_t fromEnd);

// Throws ds::Error naming `what` when a run leaves the full tensor, has a zero count or repeat,
// overlaps itself or another run, or the local elements do not add up to `localNumel`.
void checkSliceMap(const SliceMap& map, uint64_t localNumel, const std::string& what);

}  // namespace ds
