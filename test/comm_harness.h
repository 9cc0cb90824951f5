// Runs a body on every rank of a communicator group, ranks as threads of this process, for each
// backend: in-process, shared memory, Gloo over loopback TCP, hierarchical (nodes of shared-memory
// groups, leaders over Gloo). Exceptions from any rank are rethrown after all threads joined.
#pragma once

#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "runtime/comm/group_factory.h"
#include "runtime/comm/memory_store.h"
#include "runtime/comm/shm_communicator.h"

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

template <typename Body>
void onThreads(int world, Body body) {
  std::vector<std::thread> threads;
  std::vector<std::exception_ptr> errors(world);
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  for (auto& thread : threads) thread.join();
  for (auto& error : errors)
    if (error) std::rethrow_exception(error);
}

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
    options.backend = backend == Backend::Shm    ? "shm"
                      : backend == Backend::Gloo ? "gloo"
                                                 : "hierarchical";
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
