// splitmix64's finaliser (Steele, Lea and Flood, "Fast splittable pseudorandom number generators",
// OOPSLA'14): a 64-bit hash, so that value k of a stream is a pure function of k. Plain 64-bit
// shifts, xors and multiplies, which the compiler vectorises under each instruction set (the
// dropout kernel). Internal linkage, like philox_impl.h: files built for different instruction
// sets must not share an out-of-line copy.
#pragma once

#include <cstdint>

namespace {

inline uint64_t splitmixFinalize(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace
