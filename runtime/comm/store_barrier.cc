// storeBarrier: a counter, and an "open" key set by the last rank to arrive.
#include "runtime/comm/store_barrier.h"

namespace ds::runtime {

void storeBarrier(Store& store, const std::string& key, int worldSize,
                  std::chrono::milliseconds timeout) {
  if (store.add(key + "/arrived", 1) == worldSize) store.set(key + "/open", "1");
  store.wait({key + "/open"}, timeout);
}

}  // namespace ds::runtime
