// ThreadPool: one generation counter per call wakes the parked workers; the caller runs its share
// inline and then waits for the rest. A call that needs one participant never touches the workers.
#include "kernels/cpu/thread_pool.h"

#include <unistd.h>

namespace ds::kernels {

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& thread : threads_) {
    // In a fork()ed child the workers do not exist: joining would wait forever.
    if (owner_ == getpid())
      thread.join();
    else
      thread.detach();
  }
}

ThreadPool& ThreadPool::global() {
  static ThreadPool pool;
  return pool;
}

int ThreadPool::workers() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int>(threads_.size());
}

void ThreadPool::run(int count, const std::function<void(int)>& task) {
  if (count <= 0) return;
  if (count == 1) return task(0);
  std::lock_guard<std::mutex> call(callMutex_);
  if (!threads_.empty() && owner_ != getpid()) {
    for (int i = 0; i < count; ++i) task(i);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (threads_.empty()) owner_ = getpid();
    while (static_cast<int>(threads_.size()) < count - 1) {
      const int index = static_cast<int>(threads_.size());
      threads_.emplace_back([this, index] { workerLoop(index); });
    }
    task_ = &task;
    active_ = count - 1;
    pending_ = count - 1;
    error_ = nullptr;
    ++generation_;
  }
  wake_.notify_all();

  std::exception_ptr callerError;
  try {
    task(0);
  } catch (...) {
    callerError = std::current_exception();
  }

  std::unique_lock<std::mutex> lock(mutex_);
  // The workers run finite kernel loops, so this wait ends; it has no timeout on purpose.
  done_.wait(lock, [this] { return pending_ == 0; });
  task_ = nullptr;
  if (callerError) std::rethrow_exception(callerError);
  if (error_) std::rethrow_exception(error_);
}

void ThreadPool::workerLoop(int index) {
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    if (index >= active_) continue;  // this call needs fewer workers
    const auto* task = task_;
    lock.unlock();
    std::exception_ptr error;
    try {
      (*task)(index + 1);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    if (error && !error_) error_ = error;
    if (--pending_ == 0) done_.notify_one();
  }
}

}  // namespace ds::kernels
