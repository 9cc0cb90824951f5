// The gradient norm's per-tensor sum of squares (runtime/zero/square_sum.h): the same bits however
// the slice is fed (stage 0 feeds blocks of 1024, the other stages whole sub-groups), close to an
// exact sum, and not finite exactly when an element is not.
#include "runtime/zero/square_sum.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <vector>

using ds::runtime::SquareSum;

namespace {

std::vector<float> values(size_t n) {
  std::vector<float> x(n);
  uint32_t s = 12345;
  for (float& v : x) {
    s = s * 1664525u + 1013904223u;
    v = (static_cast<float>(s >> 8) / 16777216.0f - 0.5f) * 3.0f;
  }
  return x;
}

double fedInPieces(const std::vector<float>& x, const std::vector<size_t>& pieces) {
  SquareSum sum;
  size_t at = 0;
  for (size_t k = 0; at < x.size(); ++k) {
    const size_t n = std::min(pieces[k % pieces.size()], x.size() - at);
    sum.add(x.data() + at, n);
    at += n;
  }
  return sum.total();
}

}  // namespace

TEST_CASE("square sum: the same bits whatever the pieces, close to the exact sum") {
  for (size_t n : {size_t{0}, size_t{1}, size_t{15}, size_t{16}, size_t{17}, size_t{1000},
                   size_t{4099}, size_t{100003}}) {
    INFO("n " << n);
    const std::vector<float> x = values(n);
    const double whole = fedInPieces(x, {n + 1});
    CHECK(fedInPieces(x, {1024}) == whole);
    CHECK(fedInPieces(x, {1}) == whole);
    CHECK(fedInPieces(x, {7, 3, 33, 1}) == whole);
    long double exact = 0;
    for (float v : x) exact += static_cast<long double>(v) * v;
    CHECK(whole == Approx(static_cast<double>(exact)).epsilon(1e-12));
  }
}

TEST_CASE("square sum: a NaN or infinity anywhere makes the total non-finite") {
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    for (size_t at : {size_t{0}, size_t{9}, size_t{16}, size_t{999}}) {
      std::vector<float> x = values(1000);
      x[at] = bad;
      INFO("bad " << bad << " at " << at);
      CHECK_FALSE(std::isfinite(fedInPieces(x, {1000})));
      CHECK_FALSE(std::isfinite(fedInPieces(x, {5, 11})));
    }
  }
  // The largest floats square to 1.2e77: finite in double, so only a non-finite element is flagged.
  std::vector<float> big(64, std::numeric_limits<float>::max());
  CHECK(std::isfinite(fedInPieces(big, {64})));
}
