// A small persistent thread pool for the CPU kernels: workers are started once, park on a condition
// variable between calls and are woken per call, so an optimizer step never creates threads.
// It is not a general task queue: one call runs at a time and a task must not call run() itself.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ds::kernels {

class ThreadPool {
 public:
  ThreadPool() = default;
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Runs task(i) for every i in [0, count): task 0 on the calling thread, the others on count-1
  // workers (started on first need, then kept). Returns when all have finished and rethrows the
  // first exception a task threw. Concurrent callers are served one after another.
  void run(int count, const std::function<void(int)>& task);

  // Workers started so far (the caller is not counted).
  int workers() const;

  // The process-wide pool the kernels share.
  static ThreadPool& global();

 private:
  void workerLoop(int index);

  std::mutex callMutex_;  // held for a whole run(): one call at a time
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  std::vector<std::thread> threads_;
  const std::function<void(int)>* task_ = nullptr;
  int active_ = 0;   // workers taking part in the current call: indices [0, active_)
  int pending_ = 0;  // of those, how many have not finished yet
  uint64_t generation_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
  pid_t owner_ = 0;  // the process that started the workers; a fork()ed child has none of them
};

}  // namespace ds::kernels
