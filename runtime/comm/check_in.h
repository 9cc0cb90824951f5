// After a collective failed: which ranks did not answer? Every rank that saw op number `op` fail
// checks in under it in the store; the ranks that do not check in within `grace` are named (dead,
// hung, or still stuck in the op). Used by backends whose transport cannot tell (Gloo, NCCL).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "common/error.h"
#include "runtime/comm/store.h"

namespace ds::runtime {

// Checks in for op number `op` and returns the TimeoutError to throw: "<backend> <op> on rank R:
// rank 2 did not answer (<cause>)", or "... failed (<cause>)" when everyone checked in.
TimeoutError collectiveFailure(Store& store, const std::string& prefix, uint64_t op, int rank,
                               int size, std::chrono::milliseconds grace, const std::string& what,
                               const std::string& cause);

}  // namespace ds::runtime
