// The kernel and model tests' float arrays: normal samples from a fixed seed, and a bitwise
// comparison (the paths promise the same bits, not just close values).
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace ds::test {

inline std::vector<float> randoms(size_t n, uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

inline bool bitwiseEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace ds::test
