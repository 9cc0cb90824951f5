// Runs a body on every rank of a communicator group, ranks as threads of this process, for each
// backend: in-process, shared memory, Gloo over loopback TCP, hierarchical (nodes of shared-memory
// groups, leaders over Gloo). Exceptions from any rank are rethrown after all threads joined
// (test/rank_threads.h); rank bodies check with rankCheck, never with Catch assertions.
#pragma once

#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "runtime/comm/group_factory.h"
#include "runtime/comm/memory_store.h"
#include "runtime/comm/shm_communicator.h"
#include "test/rank_threads.h"

namespace ds::test {

enum class Backend { InProcess, Shm, Gloo, Hierarchical };

inline const char* backendLabel(Backend backend) {
  switch (backend) {
    case Backend::InProcess:
      return "in-process";
    case Backend::Shm:
      return "shm";
    case Backend::Gloo:
      return "gloo";
    case Backend::Hierarchical:
      return "hierarchical";
  }
  return "?";
}

// Small chunks so that a few thousand elements cross several chunks.
constexpr size_t kTestChunkBytes = 4096;

// `nodeSizes` lays the ranks out on nodes (hierarchical and gloo); shm and in-process use one node.
template <typename Body>
void runGroup(Backend backend, const std::vector<int>& nodeSizes, Body body,
              std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  int world = 0;
  for (int size : nodeSizes) world += size;
  if (backend == Backend::InProcess) {
    runtime::ShmOptions options;
    options.chunkBytes = kTestChunkBytes;
    options.timeout = timeout;
    auto group = runtime::ShmCommunicator::inProcessGroup(world, options);
    onThreads(world, [&](int r) { body(group[r]); });
    return;
  }
  runtime::MemoryStore store;
  onThreads(world, [&](int r) {
    runtime::GroupOptions options;
    options.backend = backend == Backend::Shm    ? ds::CommBackend::Shm
                      : backend == Backend::Gloo ? ds::CommBackend::Gloo
                                                 : ds::CommBackend::Hierarchical;
    options.bindAddress = "127.0.0.1";
    options.storePrefix = "test";
    options.timeout = timeout;
    options.shmChunkBytes = kTestChunkBytes;
    runtime::GroupFactory factory(
        store, {r, backend == Backend::Shm ? std::vector<int>{world} : nodeSizes}, options);
    auto comm = factory.world();
    body(*comm);
  });
}

}  // namespace ds::test
