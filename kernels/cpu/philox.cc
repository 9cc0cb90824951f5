// The scalar Philox4x32-10 entry points (known-answer tests, uniform initialisers); compiled
// without instruction-set flags, sharing the round function with the kernels' vectorised loops.
#include "kernels/cpu/philox.h"

#include "kernels/cpu/philox_impl.h"

namespace ds::kernels {

PhiloxWords philox4x32_10(PhiloxWords c, std::array<uint32_t, 2> key) {
  philoxRounds(c[0], c[1], c[2], c[3], key[0], key[1]);
  return c;
}

PhiloxWords philoxBlock(uint64_t seed, uint64_t stream, uint64_t block) {
  return philox4x32_10({static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
                        static_cast<uint32_t>(stream), static_cast<uint32_t>(stream >> 32)},
                       {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
}

}  // namespace ds::kernels
