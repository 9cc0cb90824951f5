// CommQueue: a FIFO of collectives on one IoPool thread (or inline).
#include "runtime/zero/comm_queue.h"

namespace ds::runtime {

CommQueue::CommQueue(bool background) {
  if (background) thread_.emplace(1);
}

std::shared_future<void> CommQueue::submit(std::function<void()> op) {
  if (thread_) return thread_->submit(std::move(op)).share();
  std::packaged_task<void()> task(std::move(op));
  std::shared_future<void> done = task.get_future().share();
  task();
  return done;
}

}  // namespace ds::runtime
