// MemoryStore: a thread-safe Store held in this process. The coordinator serves it to workers over
// gRPC; tests use it directly for ranks running as threads. close() wakes every blocked caller.
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>

#include "runtime/comm/store.h"

namespace ds::runtime {

// What one job may keep in the store, so that a buggy or hostile peer cannot exhaust the
// coordinator's memory or a gRPC message. Generous for real bootstraps: Gloo's full-mesh rendezvous
// stores one value of about 50 bytes per peer for every rank (400 KiB per rank at 8192 ranks).
struct StoreLimits {
  size_t maxKeyBytes = 4096;
  size_t maxValueBytes = size_t{4} << 20;  // gRPC's default message limit
  size_t maxKeys = size_t{1} << 20;
  size_t maxTotalBytes = size_t{2} << 30;  // keys and values together
  size_t maxKeysPerWait = 65536;           // one per rank of the largest job
};

class MemoryStore : public Store {
 public:
  explicit MemoryStore(StoreLimits limits = {}) : limits_(limits) {}

  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key, std::chrono::milliseconds timeout) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;

  // Fails every current and future blocking call with ds::Error(reason): used when the job ends,
  // so no server thread stays parked on a key that will never come.
  void close(const std::string& reason);

 private:
  void throwIfClosed() const;
  // Throws ds::Error when storing `value` under `key` would break a limit (mutex_ held).
  void checkRoom(const std::string& key, size_t valueBytes) const;
  void store(const std::string& key, std::string value);

  const StoreLimits limits_;
  size_t totalBytes_ = 0;

  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::string> values_;
  bool closed_ = false;
  std::string closeReason_;
};

}  // namespace ds::runtime
