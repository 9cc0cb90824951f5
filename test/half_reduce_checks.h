// What test_bf16_reduce.cc and test_fp16_reduce.cc check alike: a reduce function of
// kernels/cpu/half_reduce.h called on whole input arrays, and a vector path bitwise against the
// scalar one at odd lengths and with the output aliasing an input.
#pragma once

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/half_reduce.h"
#include "test/skip.h"

namespace ds::test {

using Halves = std::vector<uint16_t>;
using HalfReduceFn = void (*)(uint16_t* out, const uint16_t* const* inputs, int n, size_t count,
                              kernels::HalfReduceOp op, float scale, kernels::KernelIsa isa);

constexpr kernels::HalfReduceOp kHalfReduceOps[] = {
    kernels::HalfReduceOp::Sum, kernels::HalfReduceOp::Avg, kernels::HalfReduceOp::Max};

// Covers every 16-bit pattern once plus an odd tail, so each vector path also runs its scalar
// finish.
constexpr size_t kHalfReduceCount = 65536 + 45;

// n input arrays of `count` values of a 16-bit float with `mantissaBits` (10 for fp16, 7 for
// bf16): input 0 walks every pattern in a shuffled order; the others mix random patterns with
// exact half-ulps of input 0 (so that sums land on ties) and values of input 0's exponent (so that
// they do not just vanish in the sum).
inline std::vector<Halves> mixedHalfInputs(int n, size_t count, uint64_t seed, int mantissaBits) {
  const uint16_t mantissa = static_cast<uint16_t>((1u << mantissaBits) - 1);
  const uint16_t exponentMask = static_cast<uint16_t>(0x7fff & ~mantissa);
  const uint16_t halfUlpDown = static_cast<uint16_t>((mantissaBits + 1) << mantissaBits);
  std::mt19937_64 rng(seed);
  std::vector<Halves> inputs(n, Halves(count));
  Halves all(65536);
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), rng);
  for (size_t i = 0; i < count; ++i) inputs[0][i] = all[i % all.size()];
  for (int k = 1; k < n; ++k)
    for (size_t i = 0; i < count; ++i) {
      const uint16_t exponent = inputs[0][i] & exponentMask;
      const uint64_t draw = rng();
      switch (draw % 4) {
        case 0:  // half an ulp of input 0, either sign: a tie before any other input comes in
          inputs[k][i] = exponent > halfUlpDown
                             ? static_cast<uint16_t>(((draw >> 8) & 0x8000) | (exponent - halfUlpDown))
                             : static_cast<uint16_t>(draw >> 16);
          break;
        case 1:  // same exponent, random sign and mantissa
          inputs[k][i] = static_cast<uint16_t>(exponent | ((draw >> 8) & (0x8000 | mantissa)));
          break;
        default:
          inputs[k][i] = static_cast<uint16_t>(draw >> 16);
      }
    }
  return inputs;
}

inline std::vector<const uint16_t*> pointers(const std::vector<Halves>& inputs) {
  std::vector<const uint16_t*> out;
  for (const Halves& h : inputs) out.push_back(h.data());
  return out;
}

// `count` outputs of `reduce` over the inputs; the rest of the array keeps 0xdead.
inline Halves reduceOn(HalfReduceFn reduce, kernels::KernelIsa isa,
                       const std::vector<Halves>& inputs, size_t count, kernels::HalfReduceOp op,
                       float scale) {
  Halves out(count, 0xdead);
  reduce(out.data(), pointers(inputs).data(), static_cast<int>(inputs.size()), count, op, scale,
         isa);
  return out;
}

// `isa`'s path of `reduce` bitwise against the scalar one, over inputsFor(n) for 1 to 7 inputs and
// every op, at whole and odd lengths (nothing written past the count), and with the output being
// the first or the last input (the shared-memory ring does both).
inline void checkPathAgainstScalar(HalfReduceFn reduce, const std::string& name,
                                   kernels::KernelIsa isa,
                                   const std::function<std::vector<Halves>(int n)>& inputsFor) {
  if (skipUnless(kernels::kernelIsaSupported(isa),
                 std::string("this CPU lacks ") + kernels::kernelIsaName(isa) + ": that path of " +
                     name + " is not tested here"))
    return;
  for (int n : {1, 2, 3, 4, 7})
    for (kernels::HalfReduceOp op : kHalfReduceOps) {
      INFO("inputs " << n << ", op " << static_cast<int>(op));
      const float scale = 1.0f / static_cast<float>(n == 1 ? 2 : n);
      const std::vector<Halves> inputs = inputsFor(n);
      const size_t all = inputs[0].size();
      const Halves scalar = reduceOn(reduce, kernels::KernelIsa::Scalar, inputs, all, op, scale);
      for (size_t count : {all, size_t{0}, size_t{1}, size_t{15}, size_t{31}, size_t{33}}) {
        const Halves got = reduceOn(reduce, isa, inputs, count, op, scale);
        CHECK(std::equal(got.begin(), got.begin() + count, scalar.begin()));
        CHECK(std::all_of(got.begin() + count, got.end(), [](uint16_t h) { return h == 0xdead; }));
      }
      for (size_t target : {size_t{0}, inputs.size() - 1}) {
        std::vector<Halves> aliased = inputs;
        reduce(aliased[target].data(), pointers(aliased).data(), n, all, op, scale, isa);
        CHECK(aliased[target] == scalar);
      }
    }
}

// Equal bits, except that any NaN equals any NaN (`exponentMask`: 0x7f80 for bf16, 0x7c00 for
// fp16). For a reference computed by plain C++ `a + b`: where both operands are NaN, which payload
// comes out depends on how the compiler ordered the operands (x86 returns the first), which moved
// with unrelated edits to the test file. The kernels' own paths are compared bitwise.
inline bool sameOrBothNaN(const Halves& a, const Halves& b, uint16_t exponentMask) {
  auto nan = [&](uint16_t h) {
    return (h & exponentMask) == exponentMask && (h & ~exponentMask & 0x7fff) != 0;
  };
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i] && !(nan(a[i]) && nan(b[i]))) return false;
  return true;
}

// Each input repeated 16 times, so the vector paths see its values in full vectors, not only in
// the tail.
inline std::vector<Halves> repeated16(const std::vector<Halves>& inputs) {
  std::vector<Halves> wide(inputs.size());
  for (int copy = 0; copy < 16; ++copy)
    for (size_t k = 0; k < inputs.size(); ++k)
      wide[k].insert(wide[k].end(), inputs[k].begin(), inputs[k].end());
  return wide;
}

// One 16-bit float format's reduce function with what its tests need to know about the format:
// both test files build their inputs, call the reduce and check every path through this.
struct HalfReduceFormat {
  HalfReduceFn reduce;
  const char* name;       // "bf16Reduce", "fp16Reduce": names the skipped path
  int mantissaBits;       // 7 for bf16, 10 for fp16
  uint16_t exponentMask;  // 0x7f80 for bf16, 0x7c00 for fp16

  std::vector<Halves> inputs(int n, size_t count, uint64_t seed) const {
    return mixedHalfInputs(n, count, seed, mantissaBits);
  }

  Halves reduceOn(kernels::KernelIsa isa, const std::vector<Halves>& in, size_t count,
                  kernels::HalfReduceOp op, float scale) const {
    return ds::test::reduceOn(reduce, isa, in, count, op, scale);
  }

  // `isa`'s path against the scalar one over inputs(n, kHalfReduceCount, seedBase + n).
  void checkPath(kernels::KernelIsa isa, uint64_t seedBase) const {
    const HalfReduceFormat format = *this;
    checkPathAgainstScalar(reduce, name, isa, [format, seedBase](int n) {
      return format.inputs(n, kHalfReduceCount, seedBase + n);
    });
  }

  // The scalar path over inputs(n, kHalfReduceCount, seedBase + n) for 1, 2, 3 and 7 inputs,
  // every op and each of `scales`, against `reference(inputs, count, op, scale)` (equal bits, any
  // NaN for any NaN: see sameOrBothNaN).
  void checkScalarAgainst(const std::function<Halves(const std::vector<Halves>&, size_t,
                                                     kernels::HalfReduceOp, float)>& reference,
                          uint64_t seedBase, const std::vector<float>& scales) const {
    for (int n : {1, 2, 3, 7})
      for (kernels::HalfReduceOp op : kHalfReduceOps) {
        INFO("inputs " << n << ", op " << static_cast<int>(op));
        const std::vector<Halves> in = inputs(n, kHalfReduceCount, seedBase + n);
        for (float scale : scales)
          CHECK(sameOrBothNaN(reduceOn(kernels::KernelIsa::Scalar, in, kHalfReduceCount, op, scale),
                              reference(in, kHalfReduceCount, op, scale), exponentMask));
      }
  }

  // On every path this CPU runs: `sums` (one array per input, each repeated 16 times) summed
  // with scale 1 give `expected` in every copy; then `more(isa)` for that path's own checks.
  void checkSumsOnEveryPath(const std::vector<Halves>& sums, const Halves& expected,
                            const std::function<void(kernels::KernelIsa)>& more) const {
    for (kernels::KernelIsa isa :
         {kernels::KernelIsa::Scalar, kernels::KernelIsa::Avx2, kernels::KernelIsa::Avx512}) {
      if (!kernels::kernelIsaSupported(isa)) continue;
      INFO(kernels::kernelIsaName(isa));
      const std::vector<Halves> wide = repeated16(sums);
      const Halves got = reduceOn(isa, wide, wide[0].size(), kernels::HalfReduceOp::Sum, 1.0f);
      for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == expected[i % expected.size()]);
      more(isa);
    }
  }
};

}  // namespace ds::test

// The two vector-path test cases of a HalfReduceFormat, "<name> avx2 path matches scalar bitwise"
// and the avx512 one, each against the scalar path over inputs seeded from `seedBase`.
#define DS_HALF_REDUCE_VECTOR_PATH_TESTS(format, name, tag, seedBase) \
  TEST_CASE(name " avx2 path matches scalar bitwise", tag) {          \
    (format).checkPath(ds::kernels::KernelIsa::Avx2, seedBase);       \
  }                                                                   \
  TEST_CASE(name " avx512 path matches scalar bitwise", tag) {        \
    (format).checkPath(ds::kernels::KernelIsa::Avx512, seedBase);     \
  }
