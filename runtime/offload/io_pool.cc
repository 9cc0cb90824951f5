// IoPool's threads: each takes the oldest queued transfer, runs it outside the lock, and exits
// only when asked to and nothing is left queued.
#include "runtime/offload/io_pool.h"

#include <string>

#include "common/error.h"

namespace ds::runtime {

IoPool::IoPool(int threads) {
  if (threads < 1) throw Error("IoPool: " + std::to_string(threads) + " threads; at least 1");
  threads_.reserve(static_cast<size_t>(threads));
  for (int t = 0; t < threads; ++t) threads_.emplace_back([this] { serve(); });
}

IoPool::~IoPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  queued_.notify_all();
  for (std::thread& t : threads_) t.join();
}

std::future<void> IoPool::submit(std::function<void()> work) {
  std::packaged_task<void()> task(std::move(work));
  std::future<void> done = task.get_future();
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(std::move(task));
  }
  queued_.notify_one();
  return done;
}

void IoPool::serve() {
  for (;;) {
    std::packaged_task<void()> task;
    {
      std::unique_lock lock(mutex_);
      queued_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left to run
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();  // an exception is stored in the task's future, not thrown here
  }
}

}  // namespace ds::runtime
