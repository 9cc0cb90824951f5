// CPU-Adam (kernels/cpu/cpu_adam.h) against the scalar reference adamUpdate: every path this CPU
// runs, odd counts and unaligned pointers, several thread counts, both decay modes, several steps,
// NaN/inf inputs and the fused bf16/fp16 copy must all give bitwise the reference's results.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <thread>
#include <vector>

#include "common/error.h"
#include "kernels/cpu/cpu_adam.h"
#include "kernels/cpu/half_convert.h"
#include "test/skip.h"

using namespace ds::kernels;

namespace {

// Step constants the way runtime/optim/adam.cc derives them for step t.
AdamStepConstants stepConstants(int t, bool decoupled, double weightDecay) {
  return adamStepConstants(1e-2, 0.9, 0.999, 1e-8, weightDecay, decoupled, t);
}

uint32_t bitsOf(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  return bits;
}

// Equal bits, or both NaN: x86 propagates one NaN operand's payload, and which one depends on the
// operand order the compiler chose for a commutative add or multiply, not on the maths.
bool sameValue(float a, float b) {
  return bitsOf(a) == bitsOf(b) || (std::isnan(a) && std::isnan(b));
}

// Index of the first element where the arrays differ, or -1.
long firstDifference(const float* a, const float* b, size_t count) {
  for (size_t i = 0; i < count; ++i)
    if (!sameValue(a[i], b[i])) return static_cast<long>(i);
  return -1;
}

constexpr float kGuard = 12345.0f;  // written past the end: no path may touch it
constexpr uint16_t kHalfGuard = 0xbeef;

// Optimizer state in buffers with room before (for misaligned starts) and after (for guards).
struct State {
  std::vector<float> pBuf, gBuf, mBuf, vBuf;
  std::vector<uint16_t> halfBuf;
  float *p, *g, *m, *v;
  uint16_t* half;
  size_t count;

  State(size_t n, size_t offset, uint32_t seed) : count(n) {
    // Different offsets per array: the arrays are misaligned relative to each other as well.
    pBuf.assign(n + 16, kGuard);
    gBuf.assign(n + 16, kGuard);
    mBuf.assign(n + 16, kGuard);
    vBuf.assign(n + 16, kGuard);
    halfBuf.assign(n + 16, kHalfGuard);
    p = pBuf.data() + offset;
    g = gBuf.data() + (offset + 1) % 8;
    m = mBuf.data() + (offset + 3) % 8;
    v = vBuf.data() + (offset + 5) % 8;
    half = halfBuf.data() + offset;
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (size_t i = 0; i < n; ++i) {
      p[i] = normal(rng);
      m[i] = 0.0f;
      v[i] = 0.0f;
    }
  }

  void newGrads(std::mt19937& rng) {
    // Mixed magnitudes so that rounding differences, if any, would show.
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_int_distribution<int> scale(-20, 5);
    for (size_t i = 0; i < count; ++i) g[i] = std::ldexp(normal(rng), scale(rng));
  }
};

// Every count, alignment, thread count, decay mode and half format: bitwise the reference.
void checkBitwiseAgainstReference(AdamSimd simd) {
  const std::vector<size_t> counts = {0, 1, 7, 15, 16, 17, 1009, 100003};
  const std::vector<size_t> offsets = {0, 1, 3};
  const std::vector<int> threadCounts = {1, 2, 3, 8};
  for (size_t count : counts) {
    for (size_t offset : offsets) {
      for (int threads : threadCounts) {
        for (bool decoupled : {true, false}) {
          for (HalfFormat format : {HalfFormat::None, HalfFormat::Bf16, HalfFormat::Fp16}) {
            INFO("path " << adamSimdName(simd) << " count " << count << " offset " << offset
                         << " threads " << threads << " decoupled " << decoupled << " half "
                         << static_cast<int>(format));
            const uint32_t seed = static_cast<uint32_t>(count * 7 + offset);
            State ours(count, offset, seed), ref(count, offset, seed);
            std::mt19937 rng(seed);
            HalfCopy copy;
            if (format != HalfFormat::None) copy = {ours.half, format};
            for (int t = 1; t <= 3; ++t) {
              INFO("step " << t);
              ours.newGrads(rng);
              std::memcpy(ref.g, ours.g, count * sizeof(float));
              const AdamStepConstants c = stepConstants(t, decoupled, 0.01);
              cpuAdamStep(ours.p, ours.g, ours.m, ours.v, count, c, copy, threads, simd);
              adamUpdate(ref.p, ref.g, ref.m, ref.v, count, c);
              // Bitwise, not NaN-tolerant: these inputs are finite.
              REQUIRE(std::memcmp(ours.p, ref.p, count * sizeof(float)) == 0);
              REQUIRE(std::memcmp(ours.m, ref.m, count * sizeof(float)) == 0);
              REQUIRE(std::memcmp(ours.v, ref.v, count * sizeof(float)) == 0);
              for (size_t i = 0; i < count && format != HalfFormat::None; ++i) {
                const uint16_t want =
                    format == HalfFormat::Bf16 ? floatToBf16(ref.p[i]) : floatToFp16(ref.p[i]);
                if (ours.half[i] != want) FAIL("half copy differs at " << i);
              }
            }
            CHECK(ours.p[count] == kGuard);
            CHECK(ours.m[count] == kGuard);
            CHECK(ours.v[count] == kGuard);
            CHECK(ours.half[count] == kHalfGuard);
            if (format == HalfFormat::None) CHECK(ours.half[0] == kHalfGuard);
          }
        }
      }
    }
  }
}

// NaN and infinite gradients and params propagate exactly as in the reference.
void checkSpecialValues(AdamSimd simd) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const size_t count = 100003;
  for (bool decoupled : {true, false}) {
    for (HalfFormat format : {HalfFormat::Bf16, HalfFormat::Fp16}) {
      INFO("path " << adamSimdName(simd) << " decoupled " << decoupled << " half "
                   << static_cast<int>(format));
      State ours(count, 1, 7), ref(count, 1, 7);
      std::mt19937 rng(11);
      for (int t = 1; t <= 3; ++t) {
        ours.newGrads(rng);
        // Specials in heads, vector bodies, thread-chunk edges and tails.
        for (size_t at :
             {size_t{0}, size_t{5}, size_t{40}, size_t{41}, size_t{50001}, size_t{count - 2}})
          ours.g[at] = nan;
        for (size_t at : {size_t{2}, size_t{33}, size_t{70000}, size_t{count - 1}})
          ours.g[at] = t == 2 ? -inf : inf;
        ours.g[100] = 1e30f;  // v overflows to inf: params get -0 or a finite step, not NaN
        if (t == 1) {
          ours.p[3] = inf;
          ref.p[3] = inf;
          ours.p[60000] = -nan;
          ref.p[60000] = -nan;
        }
        std::memcpy(ref.g, ours.g, count * sizeof(float));
        const AdamStepConstants c = stepConstants(t, decoupled, decoupled ? 0.01 : 0.0);
        cpuAdamStep(ours.p, ours.g, ours.m, ours.v, count, c, {ours.half, format}, 2, simd);
        adamUpdate(ref.p, ref.g, ref.m, ref.v, count, c);
        CHECK(firstDifference(ours.p, ref.p, count) == -1);
        CHECK(firstDifference(ours.m, ref.m, count) == -1);
        CHECK(firstDifference(ours.v, ref.v, count) == -1);
        // The copy is the converter applied to the value this path wrote, NaN payload included.
        long badHalf = -1;
        for (size_t i = 0; i < count && badHalf < 0; ++i) {
          const uint16_t want =
              format == HalfFormat::Bf16 ? floatToBf16(ours.p[i]) : floatToFp16(ours.p[i]);
          if (ours.half[i] != want) badHalf = static_cast<long>(i);
        }
        CHECK(badHalf == -1);
      }
      CHECK(std::isnan(ours.p[0]));
      // An infinite param stays infinite under AdamW; under L2 decay 0 * inf makes it NaN.
      CHECK((decoupled ? std::isinf(ours.p[3]) : std::isnan(ours.p[3])));
      CHECK(std::isnan(ours.p[60000]));
      CHECK(std::isfinite(ours.p[7]));
    }
  }
}

// The half copy rounds to nearest even and keeps NaN.
void checkHalfCopyRounding(AdamSimd simd) {
  // Params chosen so that the update leaves them exactly as they are (zero gradient and moments,
  // no decay): the copy then sees these exact bit patterns.
  std::vector<float> values = {1.0f,
                               -2.5f,
                               65504.0f,  // fp16 max
                               65520.0f,  // rounds to fp16 inf
                               1e-8f,     // fp16 subnormal range
                               3.0e38f,   // bf16 rounds up
                               std::numeric_limits<float>::infinity(),
                               -std::numeric_limits<float>::infinity(),
                               std::numeric_limits<float>::quiet_NaN(),
                               std::numeric_limits<float>::denorm_min()};
  uint32_t patterns[] = {0x3f808000u, 0x3f818000u, 0x3f80c000u, 0x7f7fffffu,
                         0x7f800001u, 0xff800001u, 0x7fc00001u, 0x3fffffffu};
  for (uint32_t bits : patterns) {
    float x;
    std::memcpy(&x, &bits, sizeof(x));
    values.push_back(x);
  }
  while (values.size() < 40) values.push_back(static_cast<float>(values.size()) * 1.0001f);
  const size_t n = values.size();
  for (HalfFormat format : {HalfFormat::Bf16, HalfFormat::Fp16}) {
    INFO("path " << adamSimdName(simd) << " half " << static_cast<int>(format));
    std::vector<float> p = values, g(n, 0.0f), m(n, 0.0f), v(n, 0.0f);
    std::vector<uint16_t> half(n, 0);
    AdamStepConstants c = stepConstants(1, true, 0.0);
    cpuAdamStep(p.data(), g.data(), m.data(), v.data(), n, c, {half.data(), format}, 1, simd);
    for (size_t i = 0; i < n; ++i) {
      INFO("element " << i << " bits " << std::hex << bitsOf(values[i]));
      if (!std::isnan(values[i])) REQUIRE(bitsOf(p[i]) == bitsOf(values[i]));
      const uint16_t want = format == HalfFormat::Bf16 ? floatToBf16(p[i]) : floatToFp16(p[i]);
      REQUIRE(half[i] == want);
    }
  }
}

}  // namespace

TEST_CASE("cpu_adam: the best path is supported and every path has a name", "[cpu_adam]") {
  CHECK(adamSimdSupported(bestAdamSimd()));
  CHECK(adamSimdSupported(AdamSimd::Scalar));
  CHECK(std::string(adamSimdName(AdamSimd::Scalar)) == "scalar");
  CHECK(std::string(adamSimdName(AdamSimd::Avx2)) == "avx2");
  CHECK(std::string(adamSimdName(AdamSimd::Avx512)) == "avx512");
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c"))
    CHECK(bestAdamSimd() != AdamSimd::Scalar);
}

TEST_CASE("cpu_adam: concurrent callers each get their own correct result", "[cpu_adam]") {
  const size_t count = 70001;
  std::vector<std::thread> callers;
  std::vector<int> failures(4, 0);
  for (int k = 0; k < 4; ++k) {
    callers.emplace_back([&, k] {
      State ours(count, k, 100 + k), ref(count, k, 100 + k);
      std::mt19937 rng(k);
      for (int t = 1; t <= 5; ++t) {
        ours.newGrads(rng);
        std::memcpy(ref.g, ours.g, count * sizeof(float));
        const AdamStepConstants c = stepConstants(t, k % 2 == 0, 0.01);
        cpuAdamStep(ours.p, ours.g, ours.m, ours.v, count, c, {}, 2);
        adamUpdate(ref.p, ref.g, ref.m, ref.v, count, c);
        if (std::memcmp(ours.p, ref.p, count * sizeof(float)) != 0) ++failures[k];
      }
    });
  }
  for (auto& caller : callers) caller.join();
  CHECK(failures == std::vector<int>(4, 0));
}

TEST_CASE("cpu_adam: bad requests are refused with a message naming the fix", "[cpu_adam]") {
  std::vector<float> p(8, 1.0f), g(8, 1.0f), m(8, 0.0f), v(8, 0.0f);
  std::vector<uint16_t> half(8);
  const AdamStepConstants c = stepConstants(1, true, 0.0);
  CHECK_THROWS_WITH(
      cpuAdamStep(p.data(), g.data(), m.data(), v.data(), 8, c, {half.data(), HalfFormat::None}),
      Catch::Contains("HalfCopy.format"));
  for (AdamSimd simd : {AdamSimd::Avx2, AdamSimd::Avx512}) {
    if (adamSimdSupported(simd)) continue;
    CHECK_THROWS_AS(cpuAdamStep(p.data(), g.data(), m.data(), v.data(), 8, c, {}, 1, simd),
                    ds::Error);
    CHECK_THROWS_WITH(cpuAdamStep(p.data(), g.data(), m.data(), v.data(), 8, c, {}, 1, simd),
                      Catch::Contains("bestAdamSimd()"));
  }
}

// One test case per instruction-set path, so that CTest shows a path this CPU lacks as skipped.
void checkPath(AdamSimd simd) {
  if (ds::test::skipUnless(adamSimdSupported(simd),
                           std::string("this CPU lacks the ") + adamSimdName(simd) + " path"))
    return;
  checkBitwiseAgainstReference(simd);
  checkSpecialValues(simd);
  checkHalfCopyRounding(simd);
}

TEST_CASE("cpu_adam scalar path: bitwise the reference, specials, half copies", "[cpu_adam]") {
  checkPath(AdamSimd::Scalar);
}
TEST_CASE("cpu_adam avx2 path: bitwise the reference, specials, half copies", "[cpu_adam]") {
  checkPath(AdamSimd::Avx2);
}
TEST_CASE("cpu_adam avx512 path: bitwise the reference, specials, half copies", "[cpu_adam]") {
  checkPath(AdamSimd::Avx512);
}
