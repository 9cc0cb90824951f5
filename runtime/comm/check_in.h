// After a collective failed: which ranks did not answer? Every rank that saw op number `op` fail
// checks in under it in the store; the ranks that do not check in within `grace` are named (dead,
// hung, or still stuck in the op). Used by backends whose transport cannot tell (Gloo, NCCL).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "runtime/comm/store.h"

namespace ds::runtime {

// "2" or "1, 3"; empty when every rank checked in or the store itself is gone.
std::string ranksNotCheckingIn(Store& store, const std::string& prefix, uint64_t op, int rank,
                               int size, std::chrono::milliseconds grace);

}  // namespace ds::runtime
