// MemoryStore: a thread-safe Store held in this process. The coordinator serves it to workers over
// gRPC; tests use it directly for ranks running as threads. close() wakes every blocked caller.
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>

#include "runtime/comm/store.h"

namespace ds::runtime {

class MemoryStore : public Store {
 public:
  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key, std::chrono::milliseconds timeout) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;

  // Fails every current and future blocking call with ds::Error(reason): used when the job ends,
  // so no server thread stays parked on a key that will never come.
  void close(const std::string& reason);

 private:
  void throwIfClosed() const;

  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::string> values_;
  bool closed_ = false;
  std::string closeReason_;
};

}  // namespace ds::runtime
