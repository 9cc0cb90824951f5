// MemoryStore: a thread-safe Store held in this process. The coordinator serves it to workers over
// gRPC; tests use it directly for ranks running as threads. close() wakes every blocked caller.
// Besides the blocking calls it has non-blocking waits for an event-driven server (waitAsync): a
// waiter is a callback indexed by the keys it still misses, completed by the set() that adds the
// last one, by the store's timer thread at its deadline, by close() or by cancelWait(); so a
// thousand parked reads cost memory, not threads.
#pragma once

#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>

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
  ~MemoryStore() override;

  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key, std::chrono::milliseconds timeout) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  int64_t add(const std::string& key, int64_t delta) override;
  void multiSet(const std::vector<std::pair<std::string, std::string>>& entries) override;
  std::vector<std::string> multiGet(const std::vector<std::string>& keys,
                                    std::chrono::milliseconds timeout) override;

  // Non-blocking: `done` runs exactly once, with the keys' values once all exist, or with the
  // error (TimeoutError at the deadline, Error when closed or cancelled). It runs on the thread
  // that completes the wait (possibly this one, before waitAsync returns) and must not block.
  // Returns the id for cancelWait.
  using WaitDone = std::function<void(std::exception_ptr error, std::vector<std::string> values)>;
  uint64_t waitAsync(std::vector<std::string> keys, std::chrono::milliseconds timeout,
                     WaitDone done);
  // Completes a pending wait with a "cancelled" error now; nothing if it already completed.
  void cancelWait(uint64_t id);

  // Fails every current and future blocking call with ds::Error(reason): used when the job ends,
  // so no server thread stays parked on a key that will never come.
  void close(const std::string& reason);

 private:
  void throwIfClosed() const;
  // Throws ds::Error when storing `value` under `key` would break a limit (mutex_ held).
  void checkRoom(const std::string& key, size_t valueBytes) const;
  bool store(const std::string& key, std::string value);  // true: the key is new
  void checkWaitSize(size_t keys) const;
  struct Waiter {
    std::vector<std::string> keys;
    size_t missing = 0;  // distinct keys not set yet
    std::chrono::steady_clock::time_point deadline;
    std::chrono::milliseconds timeout;
    WaitDone done;
  };
  using Ready = std::vector<std::pair<WaitDone, std::vector<std::string>>>;
  // A key was added (mutex_ held): waiters it completes move to `ready`.
  void keyAdded(const std::string& key, Ready& ready);
  std::vector<std::string> valuesOf(const std::vector<std::string>& keys) const;
  std::vector<std::string> missingOf(const std::vector<std::string>& keys) const;  // in order
  Waiter takeWaiter(uint64_t id);  // mutex_ held; removes it from every index
  void runTimer();

  const StoreLimits limits_;
  size_t totalBytes_ = 0;

  std::mutex mutex_;
  std::condition_variable changed_;
  std::unordered_map<std::string, std::string> values_;  // looked up, never walked in order
  bool closed_ = false;
  std::string closeReason_;

  uint64_t nextWaiter_ = 1;
  std::unordered_map<uint64_t, Waiter> waiters_;
  std::unordered_multimap<std::string, uint64_t> waitingOn_;  // missing key -> waiter
  std::set<std::pair<std::chrono::steady_clock::time_point, uint64_t>> deadlines_;
  std::condition_variable timerWake_;
  std::thread timer_;  // started by the first waitAsync
  bool stopTimer_ = false;
};

}  // namespace ds::runtime
