// CommQueue: every collective the engine issues, run in submission order. With overlap_comm the
// ops run on one background thread, so reductions overlap the rest of the backward pass and
// stage-3 gathers run ahead of use; without it they run inline. One queue per engine keeps the
// collective order identical on every rank, which any concurrent issuing would not.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>

namespace ds::runtime {

class CommQueue {
 public:
  explicit CommQueue(bool background);
  ~CommQueue();
  CommQueue(const CommQueue&) = delete;
  CommQueue& operator=(const CommQueue&) = delete;

  // The op's exception, if any, comes out of the future's get().
  std::shared_future<void> submit(std::function<void()> op);
  // Runs `op` after everything submitted so far and waits for it.
  void run(std::function<void()> op) { submit(std::move(op)).get(); }
  // Returns once everything submitted so far has run.
  void waitIdle() {
    run([] {});
  }

 private:
  void loop();

  bool background_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::packaged_task<void()>> tasks_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace ds::runtime
