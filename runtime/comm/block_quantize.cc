#include "runtime/comm/block_quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/error.h"

namespace ds::runtime {
namespace {

constexpr size_t kWeightBlockLimit = 8000;

size_t valueBytes(size_t count, int bits) { return bits == 8 ? count : (count + 1) / 2; }

void checkBits(int bits) {
  if (bits != 8 && bits != 4)
    throw Error("BlockQuantizer: " + std::to_string(bits) + " bits (8 or 4 only)");
}

}  // namespace

size_t BlockQuantizer::bytes(size_t count) const {
  checkBits(bits);
  const size_t raw = blocks(count) * sizeof(float) + valueBytes(count, bits);
  return (raw + 1) / 2 * 2;
}

void BlockQuantizer::quantize(const float* in, size_t count, uint8_t* out) const {
  checkBits(bits);
  const size_t nBlocks = blocks(count);
  auto* values = out + nBlocks * sizeof(float);
  std::memset(values, 0, bytes(count) - nBlocks * sizeof(float));
  const float levels = static_cast<float>(1 << bits);  // 2^bits
  const int lo = -(1 << (bits - 1)), hi = (1 << (bits - 1)) - 1;
  for (size_t b = 0; b < nBlocks; ++b) {
    const size_t begin = b * block, end = std::min(count, begin + block);
    float absmax = 0.0f;
    for (size_t i = begin; i < end; ++i) absmax = std::max(absmax, std::fabs(in[i]));
    const float scale = absmax > 0.0f ? levels / (2.0f * absmax) : 1.0f;
    const float inverse = 1.0f / scale;
    std::memcpy(out + b * sizeof(float), &inverse, sizeof(float));
    for (size_t i = begin; i < end; ++i) {
      // nearbyint: round half to even in the default rounding mode, as __float2int_rn.
      const int q = std::clamp(static_cast<int>(std::nearbyint(in[i] * scale)), lo, hi);
      if (bits == 8) {
        values[i] = static_cast<uint8_t>(static_cast<int8_t>(q));
      } else {
        const auto nibble = static_cast<uint8_t>(q & 0xF);
        values[i / 2] |= static_cast<uint8_t>(i % 2 == 0 ? nibble : nibble << 4);
      }
    }
  }
}

void BlockQuantizer::dequantize(const uint8_t* in, size_t count, float* out, bool add) const {
  checkBits(bits);
  const size_t nBlocks = blocks(count);
  const uint8_t* values = in + nBlocks * sizeof(float);
  for (size_t b = 0; b < nBlocks; ++b) {
    float inverse;
    std::memcpy(&inverse, in + b * sizeof(float), sizeof(float));
    const size_t begin = b * block, end = std::min(count, begin + block);
    for (size_t i = begin; i < end; ++i) {
      int q;
      if (bits == 8) {
        q = static_cast<int8_t>(values[i]);
      } else {
        const int nibble = i % 2 == 0 ? values[i / 2] & 0xF : values[i / 2] >> 4;
        q = nibble >= 8 ? nibble - 16 : nibble;
      }
      const float v = static_cast<float>(q) * inverse;
      out[i] = add ? out[i] + v : v;
    }
  }
}

BlockQuantizer weightQuantizer(size_t count) {
  const size_t blocks = std::max<size_t>(1, (count + kWeightBlockLimit - 1) / kWeightBlockLimit);
  return {8, std::max<size_t>(1, (count + blocks - 1) / blocks)};
}

}  // namespace ds::runtime
