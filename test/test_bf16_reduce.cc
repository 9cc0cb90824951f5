// bf16Reduce: the scalar path against a plain per-element reference (and known ties), then every
// vector path this CPU runs bitwise against the scalar one, over every bf16 pattern (NaNs,
// infinities, denormals), constructed ties, odd lengths and outputs aliasing an input.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cpu/half_convert.h"
#include "kernels/cpu/half_reduce.h"
#include "test/half_reduce_checks.h"

using ds::kernels::HalfReduceOp;
using ds::kernels::KernelIsa;
using ds::test::Halves;

namespace {

const ds::test::HalfReduceFormat kBf16{ds::kernels::bf16Reduce, "bf16Reduce", 7, 0x7f80};

// The plain meaning: widen, combine left to right in fp32 as std::max / +, scale, round once.
Halves reference(const std::vector<Halves>& inputs, size_t count, HalfReduceOp op, float scale) {
  Halves out(count);
  for (size_t i = 0; i < count; ++i) {
    float acc = ds::kernels::bf16ToFloat(inputs[0][i]);
    for (size_t k = 1; k < inputs.size(); ++k) {
      const float next = ds::kernels::bf16ToFloat(inputs[k][i]);
      acc = op == HalfReduceOp::Max ? std::max(acc, next) : acc + next;
    }
    if (op == HalfReduceOp::Avg) acc *= scale;
    out[i] = ds::kernels::floatToBf16(acc);
  }
  return out;
}

}  // namespace

TEST_CASE("bf16Reduce scalar path is the per-element fp32 reference", "[bf16_reduce]") {
  kBf16.checkScalarAgainst(reference, 7, {0.25f});
}

TEST_CASE("bf16Reduce rounds ties to even, keeps NaN and saturates to inf", "[bf16_reduce]") {
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: even is 1. (1 + 2^-7) + 2^-8: even is 1 + 2^-6.
  // 0x0001 (the smallest denormal) halved: halfway to 0, even is 0. max + max overflows to inf;
  // inf + -inf is the default NaN (negative on x86); a signalling NaN comes out quiet; max(NaN, 1)
  // keeps the NaN that came first.
  const std::vector<Halves> sums = {{0x3f80, 0x3f81, 0x7f7f, 0x7f80, 0x7f81, 0x0003},
                                    {0x3b80, 0x3b80, 0x7f7f, 0xff80, 0x3f80, 0x0000}};
  const Halves expected = {0x3f80, 0x3f82, 0x7f80, 0xffc0, 0x7fc1, 0x0003};
  kBf16.checkSumsOnEveryPath(sums, expected, [](KernelIsa isa) {
    const std::vector<Halves> denormal(1, Halves(64, 0x0001)),
        maxNan = {Halves(64, 0x7fc5), Halves(64, 0x3f80)};
    CHECK(kBf16.reduceOn(isa, denormal, 64, HalfReduceOp::Avg, 0.5f) == Halves(64, 0x0000));
    CHECK(kBf16.reduceOn(isa, maxNan, 64, HalfReduceOp::Max, 1.0f) == Halves(64, 0x7fc5));
  });
}

DS_HALF_REDUCE_VECTOR_PATH_TESTS(kBf16, "bf16Reduce", "[bf16_reduce]", 1000)
