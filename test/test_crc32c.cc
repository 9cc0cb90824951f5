// CRC32C: both paths against the published check values (RFC 3720's iSCSI vectors and
// "123456789"), against each other over every length and alignment near the 8-byte steps,
// and continuing a CRC across pieces.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/crc32c.h"

namespace {

// The paths this CPU can run: the table always, SSE4.2 where present.
std::vector<ds::Crc32cPath> paths() {
  std::vector<ds::Crc32cPath> out = {ds::Crc32cPath::Table};
  if (ds::crc32cBestPath() == ds::Crc32cPath::Sse42) out.push_back(ds::Crc32cPath::Sse42);
  return out;
}

}  // namespace

TEST_CASE("crc32c: the published check values, on every path") {
  std::vector<unsigned char> zeros(32, 0), ones(32, 0xff), up(32), down(32);
  for (int i = 0; i < 32; ++i) {
    up[i] = static_cast<unsigned char>(i);
    down[i] = static_cast<unsigned char>(31 - i);
  }
  const struct {
    const char* name;
    const void* data;
    size_t bytes;
    uint32_t crc;
  } vectors[] = {
      {"empty", "", 0, 0x00000000u},
      {"123456789", "123456789", 9, 0xe3069283u},
      {"32 zeros", zeros.data(), 32, 0x8a9136aau},
      {"32 x 0xff", ones.data(), 32, 0x62a8ab43u},
      {"0x00..0x1f", up.data(), 32, 0x46dd794eu},
      {"0x1f..0x00", down.data(), 32, 0x113fdb5cu},
  };
  for (const ds::Crc32cPath path : paths())
    for (const auto& v : vectors) {
      INFO(ds::crc32cPathName(path) << ": " << v.name);
      CHECK(ds::crc32cWith(path, v.data, v.bytes) == v.crc);
    }
  CHECK(ds::crc32c("123456789", 9) == 0xe3069283u);
  CHECK(ds::hex32(0xe3069283u) == "e3069283");
  CHECK(ds::hex32(0x1u) == "00000001");
}

TEST_CASE("crc32c: the paths agree at every length and alignment, and CRCs continue") {
  std::mt19937 rng(7);
  std::vector<unsigned char> buffer(4096 + 16);
  for (auto& b : buffer) b = static_cast<unsigned char>(rng());
  for (const ds::Crc32cPath path : paths())
    for (size_t offset = 0; offset < 8; ++offset)
      for (size_t length : {0, 1, 7, 8, 9, 15, 16, 17, 63, 64, 65, 255, 1000, 4096}) {
        INFO(ds::crc32cPathName(path) << ", offset " << offset << ", length " << length);
        const unsigned char* p = buffer.data() + offset;
        // The bitwise definition, one bit at a time: the reference both paths must match.
        uint32_t reference = 0xffffffffu;
        for (size_t i = 0; i < length; ++i) {
          reference ^= p[i];
          for (int k = 0; k < 8; ++k)
            reference = reference & 1 ? 0x82f63b78u ^ (reference >> 1) : reference >> 1;
        }
        reference ^= 0xffffffffu;
        CHECK(ds::crc32cWith(path, p, length) == reference);
        const size_t cut = length / 3;
        CHECK(ds::crc32cWith(path, p + cut, length - cut, ds::crc32cWith(path, p, cut)) ==
              reference);
      }
}

TEST_CASE("crc32c: TFRecord's mask is the rotated CRC plus a constant") {
  const uint64_t length = 0;
  const uint32_t crc = ds::crc32c(&length, 8);
  CHECK(ds::maskedCrc32c(&length, 8) == ((crc >> 15) | (crc << 17)) + 0xa282ead8u);
}

TEST_CASE("crc32c: combining two pieces' checksums gives the checksum of both in a row") {
  std::vector<unsigned char> data(70000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<unsigned char>(i * 131 + 7);
  for (const size_t cut : {size_t{0}, size_t{1}, size_t{7}, size_t{4096}, size_t{69999}}) {
    for (const size_t end : {cut, cut + 1, data.size()}) {
      if (end > data.size()) continue;
      INFO("cut " << cut << ", end " << end);
      const uint32_t a = ds::crc32c(data.data(), cut);
      const uint32_t b = ds::crc32c(data.data() + cut, end - cut);
      CHECK(ds::crc32cCombine(a, b, end - cut) == ds::crc32c(data.data(), end));
    }
  }
}

TEST_CASE("crc32c: pieces checksummed together equal each piece's CRC, on every path") {
  std::vector<unsigned char> data(5 * 4096 + 24 + 3);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<unsigned char>(i * 131 + 7);
  // Whole groups of four, a ragged last piece, fewer pieces than four, odd piece sizes, offsets.
  for (const ds::Crc32cPath path : paths())
    for (const size_t piece : {size_t{8}, size_t{24}, size_t{4096}, size_t{1000}, size_t{13}})
      for (const size_t bytes : {data.size(), size_t{4 * 24}, size_t{3 * 24 + 5}, size_t{0}})
        for (const size_t offset : {size_t{0}, size_t{3}}) {
          const size_t n = std::min(bytes, data.size() - offset);
          INFO(ds::crc32cPathName(path) << ": piece " << piece << ", " << n << " bytes at "
                                        << offset);
          std::vector<uint32_t> got((n + piece - 1) / piece + 1, 0xdeadbeef);
          ds::crc32cPiecesWith(path, data.data() + offset, n, piece, got.data());
          for (size_t p = 0; p * piece < n; ++p)
            CHECK(got[p] == ds::crc32c(data.data() + offset + p * piece,
                                       std::min(piece, n - p * piece)));
          CHECK(got[(n + piece - 1) / piece] == 0xdeadbeef);  // nothing written past the last
        }
}
