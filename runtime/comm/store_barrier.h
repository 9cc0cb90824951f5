// A barrier through the key-value store, for the end of a job: no rank may exit (closing its
// sockets, possibly with unread bytes, which makes TCP reset the connection) while a peer is still
// finishing a collective with it. Also the whole of the no-op `barrier` job.
#pragma once

#include <chrono>
#include <string>

#include "runtime/comm/store.h"

namespace ds::runtime {

// Every one of `worldSize` ranks calls this with the same key; returns when all have.
void storeBarrier(Store& store, const std::string& key, int worldSize,
                  std::chrono::milliseconds timeout);

}  // namespace ds::runtime
