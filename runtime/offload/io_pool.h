// IoPool: a fixed set of threads, created once by their owner (a swapper, an engine's collective
// queue), that run blocking work handed to them in the order it was submitted; each submission's
// future completes, or rethrows the work's error, when it has run. Not here: what may run at once
// (the owner keeps its own ordering rules, e.g. one transfer per swap slot).
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

namespace ds::runtime {

class IoPool {
 public:
  explicit IoPool(int threads);  // >= 1
  // Runs what is still queued, then joins: a future handed out never dangles.
  ~IoPool();
  IoPool(const IoPool&) = delete;
  IoPool& operator=(const IoPool&) = delete;

  // `work` must not wait for other work of this pool (with every thread busy it would never run).
  std::future<void> submit(std::function<void()> work);
  int threadCount() const { return static_cast<int>(threads_.size()); }

 private:
  void serve();

  std::mutex mutex_;
  std::condition_variable queued_;
  std::deque<std::packaged_task<void()>> queue_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;  // last: started once the queue exists
};

}  // namespace ds::runtime
