// bf16 and fp16 <-> fp32 conversion of whole arrays (round to nearest even, NaN kept NaN). The
// array forms pick AVX-512, AVX2+F16C or portable code at run time. Half values travel as uint16_t
// bits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace ds::kernels {

inline float bf16ToFloat(uint16_t bits) {
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, sizeof(value));
  return value;
}

inline uint16_t floatToBf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

inline float fp16ToFloat(uint16_t bits) {
  _Float16 half;
  std::memcpy(&half, &bits, sizeof(half));
  return static_cast<float>(half);
}

inline uint16_t floatToFp16(float value) {
  const _Float16 half = static_cast<_Float16>(value);
  uint16_t bits;
  std::memcpy(&bits, &half, sizeof(bits));
  return bits;
}

void bf16ToFloat(const uint16_t* in, float* out, size_t count);
void floatToBf16(const float* in, uint16_t* out, size_t count);
void fp16ToFloat(const uint16_t* in, float* out, size_t count);
void floatToFp16(const float* in, uint16_t* out, size_t count);

}  // namespace ds::kernels
