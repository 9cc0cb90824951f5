// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11), written
// from its definition as plain 32x32->64 multiplies and xors so that the compiler vectorises a
// loop of blocks (vpmuludq) under each instruction set. Internal linkage, like box_muller_impl.h.
#pragma once

#include <cstdint>

namespace {

constexpr uint32_t kPhiloxM0 = 0xD2511F53u, kPhiloxM1 = 0xCD9E8D57u;  // the round multipliers
constexpr uint32_t kPhiloxW0 = 0x9E3779B9u, kPhiloxW1 = 0xBB67AE85u;  // the key's Weyl steps

// One block: counter (x0..x3) through ten rounds under key (k0, k1), in place.
inline void philoxRounds(uint32_t& x0, uint32_t& x1, uint32_t& x2, uint32_t& x3, uint32_t k0,
                         uint32_t k1) {
#pragma GCC unroll 10
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kPhiloxM0) * x0;
    const uint64_t p1 = static_cast<uint64_t>(kPhiloxM1) * x2;
    const uint32_t y0 = static_cast<uint32_t>(p1 >> 32) ^ x1 ^ k0;
    const uint32_t y2 = static_cast<uint32_t>(p0 >> 32) ^ x3 ^ k1;
    x1 = static_cast<uint32_t>(p1);
    x3 = static_cast<uint32_t>(p0);
    x0 = y0;
    x2 = y2;
    k0 += kPhiloxW0;
    k1 += kPhiloxW1;
  }
}

// The 64-bit draws of blocks [firstBlock, firstBlock + blocks): key (seed), counter (block,
// stream), two draws per block, draws[2b] = x1:x0 and draws[2b + 1] = x3:x2 (high word first).
inline void philoxDraws(uint64_t* draws, uint64_t blocks, uint64_t seed, uint64_t stream,
                        uint64_t firstBlock) {
  const auto k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  const auto s0 = static_cast<uint32_t>(stream), s1 = static_cast<uint32_t>(stream >> 32);
  for (uint64_t b = 0; b < blocks; ++b) {
    const uint64_t c = firstBlock + b;
    uint32_t x0 = static_cast<uint32_t>(c), x1 = static_cast<uint32_t>(c >> 32), x2 = s0, x3 = s1;
    philoxRounds(x0, x1, x2, x3, k0, k1);
    draws[2 * b] = static_cast<uint64_t>(x1) << 32 | x0;
    draws[2 * b + 1] = static_cast<uint64_t>(x3) << 32 | x2;
  }
}

}  // namespace
