// CRC32C's two paths (see the header). The table path reads 8 bytes per step through eight
// 256-entry tables (slicing-by-8); the SSE4.2 path feeds 8 bytes per crc32 instruction.
#include "common/crc32c.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdio>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace ds {
namespace {

constexpr uint32_t kPolynomial = 0x82f63b78u;  // 0x1EDC6F41, bit-reversed

using Tables = std::array<std::array<uint32_t, 256>, 8>;

// tables[0] is the byte-at-a-time table; tables[k][b] is the CRC of byte b followed by k zeros.
constexpr Tables makeTables() {
  Tables t{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t c = b;
    for (int k = 0; k < 8; ++k) c = c & 1 ? kPolynomial ^ (c >> 1) : c >> 1;
    t[0][b] = c;
  }
  for (size_t k = 1; k < 8; ++k)
    for (uint32_t b = 0; b < 256; ++b) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xff];
  return t;
}

constexpr Tables kTables = makeTables();

// `state` is the running register (the CRC inverted); so is the result.
uint32_t tableUpdate(uint32_t state, const unsigned char* p, size_t n) {
  const auto& t = kTables;
  // The 8-byte step reads the word little-endian; elsewhere the byte loop does it all.
  if constexpr (std::endian::native == std::endian::little) {
    for (; n >= 8; n -= 8, p += 8) {
      uint64_t word;
      std::memcpy(&word, p, 8);
      const uint32_t lo = static_cast<uint32_t>(word) ^ state;
      const uint32_t hi = static_cast<uint32_t>(word >> 32);
      state = t[7][lo & 0xff] ^ t[6][(lo >> 8) & 0xff] ^ t[5][(lo >> 16) & 0xff] ^ t[4][lo >> 24] ^
              t[3][hi & 0xff] ^ t[2][(hi >> 8) & 0xff] ^ t[1][(hi >> 16) & 0xff] ^ t[0][hi >> 24];
    }
  }
  for (; n > 0; --n, ++p) state = t[0][(state ^ *p) & 0xff] ^ (state >> 8);
  return state;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t sse42Update(uint32_t state, const unsigned char* p,
                                                       size_t n) {
  for (; n > 0 && reinterpret_cast<uintptr_t>(p) % 8 != 0; --n, ++p)
    state = _mm_crc32_u8(state, *p);
  uint64_t wide = state;
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    wide = _mm_crc32_u64(wide, word);
  }
  state = static_cast<uint32_t>(wide);
  for (; n > 0; --n, ++p) state = _mm_crc32_u8(state, *p);
  return state;
}

// Four whole pieces at once, each a multiple of 8 bytes long: four independent chains of the crc32
// instruction keep its pipeline full.
__attribute__((target("sse4.2"))) void sse42FourPieces(const unsigned char* p, size_t piece,
                                                       uint32_t* out) {
  uint64_t a = ~0u, b = ~0u, c = ~0u, d = ~0u;
  for (size_t at = 0; at < piece; at += 8) {
    uint64_t w0, w1, w2, w3;
    std::memcpy(&w0, p + at, 8);
    std::memcpy(&w1, p + piece + at, 8);
    std::memcpy(&w2, p + 2 * piece + at, 8);
    std::memcpy(&w3, p + 3 * piece + at, 8);
    a = _mm_crc32_u64(a, w0);
    b = _mm_crc32_u64(b, w1);
    c = _mm_crc32_u64(c, w2);
    d = _mm_crc32_u64(d, w3);
  }
  out[0] = ~static_cast<uint32_t>(a);
  out[1] = ~static_cast<uint32_t>(b);
  out[2] = ~static_cast<uint32_t>(c);
  out[3] = ~static_cast<uint32_t>(d);
}
#endif

Crc32cPath detectPath() {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("sse4.2")) return Crc32cPath::Sse42;
#endif
  return Crc32cPath::Table;
}

}  // namespace

Crc32cPath crc32cBestPath() {
  static const Crc32cPath path = detectPath();
  return path;
}

const char* crc32cPathName(Crc32cPath path) {
  return path == Crc32cPath::Sse42 ? "sse4.2" : "table (slicing-by-8)";
}

uint32_t crc32cWith(Crc32cPath path, const void* data, size_t bytes, uint32_t crc) {
  const auto* p = static_cast<const unsigned char*>(data);
#if defined(__x86_64__)
  if (path == Crc32cPath::Sse42) return ~sse42Update(~crc, p, bytes);
#endif
  return ~tableUpdate(~crc, p, bytes);
}

uint32_t crc32c(const void* data, size_t bytes, uint32_t crc) {
  return crc32cWith(crc32cBestPath(), data, bytes, crc);
}

void crc32cPiecesWith(Crc32cPath path, const void* data, size_t bytes, size_t piece,
                      uint32_t* out) {
  if (piece == 0) return;  // no pieces: nothing to write
  const auto* p = static_cast<const unsigned char*>(data);
  size_t done = 0;
#if defined(__x86_64__)
  if (path == Crc32cPath::Sse42 && piece % 8 == 0)
    for (; bytes - done >= 4 * piece; done += 4 * piece, out += 4)
      sse42FourPieces(p + done, piece, out);
#endif
  for (; done < bytes; done += piece)
    *out++ = crc32cWith(path, p + done, std::min(piece, bytes - done));
}

void crc32cPieces(const void* data, size_t bytes, size_t piece, uint32_t* out) {
  crc32cPiecesWith(crc32cBestPath(), data, bytes, piece, out);
}

namespace {

// Polynomials over GF(2) modulo the CRC's, in its reflected bit order (bit 31 is x^0).
constexpr uint32_t kReflectedPoly = 0x82F63B78u;

uint32_t multiplyModPoly(uint32_t a, uint32_t b) {
  uint32_t product = 0;
  for (uint32_t bit = 1u << 31; bit != 0; bit >>= 1) {
    if (a & bit) product ^= b;
    b = (b & 1) ? (b >> 1) ^ kReflectedPoly : b >> 1;  // b *= x
  }
  return product;
}

// x^(8 n) modulo the polynomial: n zero bytes appended shift a CRC's register by this.
uint32_t xPowerOfBytes(uint64_t n) {
  uint32_t result = 1u << 31;  // x^0
  uint32_t square = 1u << 23;  // x^8 (one byte), squared as n's bits go by
  for (; n != 0; n >>= 1) {
    if (n & 1) result = multiplyModPoly(square, result);
    square = multiplyModPoly(square, square);
  }
  return result;
}

}  // namespace

uint32_t crc32cCombine(uint32_t crcA, uint32_t crcB, uint64_t bBytes) {
  // The CRC is affine in its input; the pre- and post-inversions of a and b cancel so that
  // crc(a b) = crc(a) x^(8 |b|) + crc(b) (mod P), as for zlib's CRC-32.
  return multiplyModPoly(xPowerOfBytes(bBytes), crcA) ^ crcB;
}

uint32_t maskedCrc32c(const void* data, size_t bytes) {
  const uint32_t crc = crc32c(data, bytes);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

std::string hex32(uint32_t value) {
  char text[9];
  std::snprintf(text, sizeof(text), "%08x", value);
  return text;
}

}  // namespace ds
