// Store: the key-value interface collectives bootstrap through (Gloo addresses, NCCL unique ids).
// Implementations: MemoryStore (in process; also what the coordinator serves) and the worker's
// gRPC client. Every blocking call takes a timeout; a timeout throws ds::TimeoutError naming the
// keys.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ds::runtime {

class Store {
 public:
  virtual ~Store() = default;

  virtual void set(const std::string& key, const std::string& value) = 0;
  // Blocks until `key` exists or `timeout` passes.
  virtual std::string get(const std::string& key, std::chrono::milliseconds timeout) = 0;
  // Blocks until every key exists or `timeout` passes.
  virtual void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) = 0;
  // Atomically adds `delta` to the integer stored at `key` (absent = 0) and returns the new value.
  // The value is stored as decimal text, so get() on a counter returns e.g. "3".
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  // Batches (one round trip each over the coordinator's store): every key set, and every key's
  // value once all exist (or a TimeoutError naming the missing ones). The defaults loop.
  virtual void multiSet(const std::vector<std::pair<std::string, std::string>>& entries);
  virtual std::vector<std::string> multiGet(const std::vector<std::string>& keys,
                                            std::chrono::milliseconds timeout);
};

}  // namespace ds::runtime
