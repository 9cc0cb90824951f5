#include "runtime/comm/check_in.h"

#include <algorithm>

#include "common/error.h"

namespace ds::runtime {
namespace {

// "2" or "1, 3"; empty when every rank checked in or the store itself is gone.
std::string ranksNotCheckingIn(Store& store, const std::string& prefix, uint64_t op, int rank,
                               int size, std::chrono::milliseconds grace) {
  const std::string base = prefix + "/failed/" + std::to_string(op) + "/";
  std::string missing;
  try {
    store.set(base + std::to_string(rank), "alive");
    const auto deadline = std::chrono::steady_clock::now() + grace;
    for (int r = 0; r < size; ++r) {
      if (r == rank) continue;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      try {
        store.get(base + std::to_string(r), std::max(left, std::chrono::milliseconds(1)));
      } catch (const TimeoutError&) {
        missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      }
    }
  } catch (const std::exception&) {
    return "";  // the store is gone too (the job is ending): nothing more to say
  }
  return missing;
}

}  // namespace

TimeoutError collectiveFailure(Store& store, const std::string& prefix, uint64_t op, int rank,
                               int size, std::chrono::milliseconds grace, const std::string& what,
                               const std::string& cause) {
  const std::string missing = ranksNotCheckingIn(store, prefix, op, rank, size, grace);
  return TimeoutError(
      what + " on rank " + std::to_string(rank) +
      (missing.empty() ? std::string(" failed") : ": rank " + missing + " did not answer") + " (" +
      cause + ")");
}

}  // namespace ds::runtime
