// Slice maps against brute force: for Megatron's slicings of a tensor (rows, columns, QKV's three
// head runs) at different model sizes, and arbitrary local ranges of each (a data-parallel
// partition of the slice), the copies sliceOverlaps finds are exactly the elements both hold.
#include <catch2/catch.hpp>
#include <map>
#include <random>

#include "common/error.h"
#include "common/slice_map.h"

using namespace ds;

namespace {

// Full element index of every local element, walking the runs as the map defines them.
std::vector<uint64_t> fullIndices(const SliceMap& m) {
  std::vector<uint64_t> out;
  if (m.whole()) {
    for (uint64_t i = 0; i < m.fullNumel; ++i) out.push_back(i);
    return out;
  }
  for (const StridedRun& r : m.runs)
    for (uint64_t i = 0; i < r.repeat; ++i)
      for (uint64_t k = 0; k < r.count; ++k) out.push_back(r.fullBegin + i * r.stride + k);
  return out;
}

// The slicings of a [rows, cols] tensor among `parts` ranks that the model uses.
SliceMap rowChunk(uint64_t rows, uint64_t cols, uint64_t parts, uint64_t part) {
  const uint64_t n = rows / parts;
  return {rows * cols, {{part * n * cols, n * cols, 1, 0}}};
}
SliceMap columnChunk(uint64_t rows, uint64_t cols, uint64_t parts, uint64_t part) {
  const uint64_t n = cols / parts;
  return {rows * cols, {{part * n, n, rows, cols}}};
}
// Rows as three sections (q, k, v of 4, 2, 2 heads of `d` rows each), each chunked by rank.
SliceMap qkvChunk(uint64_t d, uint64_t cols, uint64_t parts, uint64_t part) {
  SliceMap m{(4 + 2 + 2) * d * cols, {}};
  uint64_t sectionBegin = 0;
  for (uint64_t heads : {4, 2, 2}) {
    const uint64_t n = heads / parts * d * cols;
    m.runs.push_back({sectionBegin + part * n, n, 1, 0});
    sectionBegin += heads * d * cols;
  }
  return m;
}

void checkAgainstBruteForce(const SliceMap& to, uint64_t toBegin, uint64_t toEnd,
                            const SliceMap& from, uint64_t fromBegin, uint64_t fromEnd) {
  const std::vector<uint64_t> toFull = fullIndices(to), fromFull = fullIndices(from);
  std::map<uint64_t, uint64_t> fromLocalOf;  // full -> from's local, within from's range
  for (uint64_t j = fromBegin; j < fromEnd; ++j) fromLocalOf[fromFull[j]] = j;
  std::map<uint64_t, uint64_t> expected;  // to's local -> from's local
  for (uint64_t i = toBegin; i < toEnd; ++i)
    if (auto it = fromLocalOf.find(toFull[i]); it != fromLocalOf.end()) expected[i] = it->second;
  std::map<uint64_t, uint64_t> got;
  for (const SliceCopy& c : sliceOverlaps(to, toBegin, toEnd, from, fromBegin, fromEnd))
    for (uint64_t k = 0; k < c.count; ++k) {
      REQUIRE(got.count(c.toLocal + k) == 0);  // no element copied twice
      got[c.toLocal + k] = c.fromLocal + k;
    }
  REQUIRE(got == expected);
}

}  // namespace

TEST_CASE("slice maps: overlaps between slicings at different model sizes and partitions",
          "[slice_map]") {
  std::mt19937 rng(7);
  const uint64_t rows = 8, cols = 12, d = 2;
  using Make = SliceMap (*)(uint64_t, uint64_t, uint64_t, uint64_t);
  for (Make make : {Make{rowChunk}, Make{columnChunk}, Make{qkvChunk}}) {
    const uint64_t r = make == qkvChunk ? d : rows;
    for (uint64_t toParts : {1, 2}) {
      for (uint64_t fromParts : {1, 2}) {
        for (uint64_t toPart = 0; toPart < toParts; ++toPart)
          for (uint64_t fromPart = 0; fromPart < fromParts; ++fromPart) {
            const SliceMap to = make(r, cols, toParts, toPart),
                           from = make(r, cols, fromParts, fromPart);
            checkSliceMap(to, to.localNumel(), "to");
            for (int trial = 0; trial < 20; ++trial) {
              const uint64_t tn = to.localNumel(), fn = from.localNumel();
              uint64_t a = rng() % (tn + 1), b = rng() % (tn + 1), c = rng() % (fn + 1),
                       e = rng() % (fn + 1);
              if (a > b) std::swap(a, b);
              if (c > e) std::swap(c, e);
              checkAgainstBruteForce(to, a, b, from, c, e);
            }
          }
      }
      // And against the whole tensor (a one-rank checkpoint).
      const SliceMap to = make(r, cols, toParts, 0), whole{to.fullNumel, {}};
      checkAgainstBruteForce(to, 0, to.localNumel(), whole, 0, whole.fullNumel);
      checkAgainstBruteForce(whole, 0, whole.fullNumel, to, 0, to.localNumel());
    }
  }
  // Columns against rows: every element found once.
  checkAgainstBruteForce(columnChunk(rows, cols, 4, 1), 0, 24, rowChunk(rows, cols, 2, 1), 0, 48);
}

TEST_CASE("slice maps: bad maps are refused naming the problem", "[slice_map]") {
  CHECK_THROWS_WITH(checkSliceMap({10, {{8, 4, 1, 0}}}, 4, "t"), Catch::Contains("leaves"));
  CHECK_THROWS_WITH(checkSliceMap({10, {{0, 4, 2, 2}}}, 8, "t"), Catch::Contains("overlap"));
  CHECK_THROWS_WITH(checkSliceMap({10, {{0, 4, 1, 0}, {2, 4, 1, 0}}}, 8, "t"),
                    Catch::Contains("overlap"));
  CHECK_THROWS_WITH(checkSliceMap({10, {{0, 0, 1, 0}}}, 0, "t"), Catch::Contains("empty"));
  CHECK_THROWS_WITH(checkSliceMap({10, {{0, 4, 1, 0}}}, 5, "t"), Catch::Contains("hold 4"));
  CHECK_THROWS_WITH(sliceOverlaps({10, {}}, 0, 10, {12, {}}, 0, 12), Catch::Contains("different"));
  CHECK_NOTHROW(checkSliceMap({24, {{2, 3, 4, 6}}}, 12, "t"));
}
