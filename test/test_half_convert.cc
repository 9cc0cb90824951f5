// Array conversions between fp32 and the 16-bit formats (kernels/cpu/half_convert.h): the vector
// paths give the per-element conversion's bits for every fp16 and bf16 pattern, and for floats
// around every rounding case (ties, subnormals, overflow, infinities, NaNs), at lengths that leave
// a tail.
#include "kernels/cpu/half_convert.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <limits>
#include <vector>

using namespace ds::kernels;

namespace {

uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

float fromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Floats near each fp16 and bf16 rounding boundary: every 16-bit pattern widened, then nudged by
// the half-ulp and a few float ulps either way, plus the specials.
std::vector<float> roundingCases() {
  std::vector<float> out;
  for (uint32_t h = 0; h < 65536; h += 7) {
    const float f = fp16ToFloat(static_cast<uint16_t>(h));
    const uint32_t u = bitsOf(f);
    for (int32_t d : {-1, 0, 1, 4095, 4096, 4097, -4096})  // fp16's half ulp is 2^12 float ulps
      out.push_back(fromBits(u + static_cast<uint32_t>(d)));
    const uint32_t b = static_cast<uint32_t>(h) << 16;  // a bf16 pattern
    for (int32_t d : {-1, 0, 1, 0x7fff, 0x8000, 0x8001})
      out.push_back(fromBits(b + static_cast<uint32_t>(d)));
  }
  for (float s : {0.0f, -0.0f, 65504.0f, 65520.0f, 1e9f, -1e9f, 6e-8f, 3e-8f, 1e-30f,
                  std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::quiet_NaN(), fromBits(0x7f800001u),
                  fromBits(0xffc00123u), std::numeric_limits<float>::denorm_min()})
    out.push_back(s);
  out.push_back(1.0f);  // an odd length: the vector loops leave a tail
  return out;
}

}  // namespace

TEST_CASE("half convert: arrays give each element's conversion, every pattern and tail") {
  std::vector<uint16_t> patterns(65536 + 5);
  for (size_t i = 0; i < patterns.size(); ++i) patterns[i] = static_cast<uint16_t>(i * 40503u);
  for (size_t i = 0; i < 65536; ++i) patterns[i] = static_cast<uint16_t>(i);
  std::vector<float> wide(patterns.size());
  fp16ToFloat(patterns.data(), wide.data(), patterns.size());
  for (size_t i = 0; i < patterns.size(); ++i) {
    INFO("fp16 " << patterns[i]);
    const float want = fp16ToFloat(patterns[i]);
    REQUIRE(std::memcmp(&wide[i], &want, sizeof want) == 0);
  }
  bf16ToFloat(patterns.data(), wide.data(), patterns.size());
  for (size_t i = 0; i < patterns.size(); ++i) REQUIRE(bitsOf(wide[i]) == bitsOf(bf16ToFloat(patterns[i])));

  const std::vector<float> floats = roundingCases();
  std::vector<uint16_t> narrow(floats.size());
  floatToFp16(floats.data(), narrow.data(), floats.size());
  for (size_t i = 0; i < floats.size(); ++i) {
    INFO("float bits " << bitsOf(floats[i]));
    REQUIRE(narrow[i] == floatToFp16(floats[i]));
  }
  floatToBf16(floats.data(), narrow.data(), floats.size());
  for (size_t i = 0; i < floats.size(); ++i) {
    INFO("float bits " << bitsOf(floats[i]));
    REQUIRE(narrow[i] == floatToBf16(floats[i]));
  }
}
