// fp16Reduce: the scalar path against the arithmetic the collectives used before it (array
// conversions to fp32, add or max, scale, array conversion back), known ties, denormals,
// overflow and NaNs, then every vector path this CPU runs bitwise against the scalar one, over
// every fp16 pattern, odd lengths and outputs aliasing an input.
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

const ds::test::HalfReduceFormat kFp16{ds::kernels::fp16Reduce, "fp16Reduce", 10, 0x7c00};

// What runtime/comm/elementwise_reduce.cc computed before the fused path: whole arrays widened
// with the array conversion, combined left to right as std::max / +, scaled, narrowed back.
Halves oldArithmetic(const std::vector<Halves>& inputs, size_t count, HalfReduceOp op,
                     float scale) {
  std::vector<float> acc(count), next(count);
  ds::kernels::fp16ToFloat(inputs[0].data(), acc.data(), count);
  for (size_t k = 1; k < inputs.size(); ++k) {
    ds::kernels::fp16ToFloat(inputs[k].data(), next.data(), count);
    for (size_t i = 0; i < count; ++i)
      acc[i] = op == HalfReduceOp::Max ? std::max(acc[i], next[i]) : acc[i] + next[i];
  }
  if (op == HalfReduceOp::Avg)
    for (float& value : acc) value *= scale;
  Halves out(count);
  ds::kernels::floatToFp16(acc.data(), out.data(), count);
  return out;
}

}  // namespace

TEST_CASE("fp16Reduce scalar path gives the old convert-add-convert bits", "[fp16_reduce]") {
  kFp16.checkScalarAgainst(oldArithmetic, 17, {0.25f, 1.0f / 3.0f});
}

TEST_CASE("fp16Reduce rounds ties to even, keeps NaN, saturates to inf, keeps denormals",
          "[fp16_reduce]") {
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: even is 1. (1 + 2^-10) + 2^-11: even is
  // 1 + 2^-9. 65504 + 16 is halfway to 65536, whose even side is inf; 65504 + 15.98 stays. inf +
  // -inf is the default NaN (negative on x86); a signalling NaN comes out quiet with its payload;
  // two denormals add exactly.
  const std::vector<Halves> sums = {{0x3c00, 0x3c01, 0x7bff, 0x7bff, 0x7c00, 0x7c01, 0x0003},
                                    {0x1000, 0x1000, 0x4c00, 0x4bff, 0xfc00, 0x3c00, 0x83fe}};
  const Halves expected = {0x3c00, 0x3c02, 0x7c00, 0x7bff, 0xfe00, 0x7e01, 0x83fb};
  kFp16.checkSumsOnEveryPath(sums, expected, [](KernelIsa isa) {
    // The smallest denormal halved is a tie with 0 (even: 0); three of them halved, a tie between
    // one and two (even: two). max(NaN, 1) keeps the NaN that came first.
    const std::vector<Halves> tiny(1, Halves(64, 0x0001)), three(1, Halves(64, 0x0003)),
        maxNan = {Halves(64, 0x7e05), Halves(64, 0x3c00)};
    CHECK(kFp16.reduceOn(isa, tiny, 64, HalfReduceOp::Avg, 0.5f) == Halves(64, 0x0000));
    CHECK(kFp16.reduceOn(isa, three, 64, HalfReduceOp::Avg, 0.5f) == Halves(64, 0x0002));
    CHECK(kFp16.reduceOn(isa, maxNan, 64, HalfReduceOp::Max, 1.0f) == Halves(64, 0x7e05));
  });
}

DS_HALF_REDUCE_VECTOR_PATH_TESTS(kFp16, "fp16Reduce", "[fp16_reduce]", 2000)
