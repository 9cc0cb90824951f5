// Philox4x32-10 against Random123's published known-answer vectors (kat_vectors: zeros, all ones,
// the digits of pi), and the initialiser's mapping of (seed, stream, block) onto key and counter.
#include <catch2/catch.hpp>

#include "kernels/cpu/philox.h"

using ds::kernels::PhiloxWords;

TEST_CASE("philox: Philox4x32-10 gives Random123's known answers", "[kernels]") {
  CHECK(ds::kernels::philox4x32_10({0, 0, 0, 0}, {0, 0}) ==
        PhiloxWords{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8});
  CHECK(ds::kernels::philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
                                   {0xffffffff, 0xffffffff}) ==
        PhiloxWords{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd});
  CHECK(ds::kernels::philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
                                   {0xa4093822, 0x299f31d0}) ==
        PhiloxWords{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1});
}

TEST_CASE("philox: the initialiser's key is the seed and its counter is (block, stream)",
          "[kernels]") {
  // Low words first: the pi vector again, as a seed, a stream and a block number.
  CHECK(ds::kernels::philoxBlock(0x299f31d0a4093822ull, 0x0370734413198a2eull,
                                 0x85a308d3243f6a88ull) ==
        PhiloxWords{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1});
  CHECK(ds::kernels::philoxBlock(0, 0, 0) ==
        PhiloxWords{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8});
  // Every input moves the output.
  const PhiloxWords base = ds::kernels::philoxBlock(1, 2, 3);
  CHECK(ds::kernels::philoxBlock(1ull << 32 | 1, 2, 3) != base);
  CHECK(ds::kernels::philoxBlock(1, 2ull << 32 | 2, 3) != base);
  CHECK(ds::kernels::philoxBlock(1, 2, 3ull << 32 | 3) != base);
  CHECK(ds::kernels::philoxBlock(1, 2, 4) != base);
}
