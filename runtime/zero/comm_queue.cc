// CommQueue: a FIFO of collectives on one thread (or inline).
#include "runtime/zero/comm_queue.h"

namespace ds::runtime {

CommQueue::CommQueue(bool background) : background_(background) {
  if (background_) thread_ = std::thread([this] { loop(); });
}

CommQueue::~CommQueue() {
  if (!background_) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

std::shared_future<void> CommQueue::submit(std::function<void()> op) {
  std::packaged_task<void()> task(std::move(op));
  std::shared_future<void> done = task.get_future().share();
  if (!background_) {
    task();
    return done;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    tasks_.push_back(std::move(task));
  }
  wake_.notify_one();
  return done;
}

void CommQueue::loop() {
  for (;;) {
    std::packaged_task<void()> task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
      // Drain before stopping: an engine being destroyed still owes its peers the ops it queued.
      if (tasks_.empty()) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

}  // namespace ds::runtime
