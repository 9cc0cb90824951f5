// Symmetric block quantisation of fp32 values to int8 or int4, DeepSpeed's form (its ZeRO++
// quantiser, csrc/includes/quantization_utils.h): per block, scale = 2^bits / (2 absmax) (1 for
// an all-zero block), q = round-half-even(x * scale) clamped to [-2^(bits-1), 2^(bits-1) - 1],
// and 1 / scale stored beside the block (absmax / 128 for int8); dequantised as q / scale.
// Layout of one quantised buffer: the blocks' fp32 inverse scales, then the values (int8 one a
// byte; int4 two a byte, element 2i in the low nibble), padded to a whole number of 16-bit
// words so it travels through the 16-bit collectives unchanged.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ds::runtime {

struct BlockQuantizer {
  int bits = 8;        // 8 or 4
  size_t block = 512;  // elements per block (the last may be shorter)

  size_t blocks(size_t count) const { return (count + block - 1) / block; }
  // The bytes of `count` values quantised: scales, values, padding to an even size.
  size_t bytes(size_t count) const;
  void quantize(const float* in, size_t count, uint8_t* out) const;
  // out[i] = value i (add: out[i] += value i).
  void dequantize(const uint8_t* in, size_t count, float* out, bool add = false) const;
};

// qwZ's blocks for a rank's `count` weights: the fewest blocks of at most 8000 elements
// (DeepSpeed's limit), as equal as whole elements allow.
BlockQuantizer weightQuantizer(size_t count);

}  // namespace ds::runtime
