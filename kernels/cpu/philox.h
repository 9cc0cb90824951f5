// Philox4x32-10, the counter-based generator of cuRAND and JAX: any block of random bits is a pure
// function of (key, counter), so any element of a tensor can be drawn without the ones before it.
// The vectorised loops live in the transformer kernels (normalFromPhilox); this is the scalar one.
#pragma once

#include <array>
#include <cstdint>

namespace ds::kernels {

using PhiloxWords = std::array<uint32_t, 4>;

// Ten rounds of Philox4x32 on `counter` under `key` (Random123's philox4x32_10).
PhiloxWords philox4x32_10(PhiloxWords counter, std::array<uint32_t, 2> key);

// The parameter initialiser's mapping: key = seed (low word first), counter = (block low, block
// high, stream low, stream high), stream naming the tensor.
PhiloxWords philoxBlock(uint64_t seed, uint64_t stream, uint64_t block);

}  // namespace ds::kernels
