// CommQueue: every collective the engine issues, run in submission order. With overlap_comm the
// ops run on one background thread, so reductions overlap the rest of the backward pass and
// stage-3 gathers run ahead of use; without it they run inline. One queue per engine keeps the
// collective order identical on every rank, which any concurrent issuing would not.
#pragma once

#include <functional>
#include <future>
#include <optional>

#include "runtime/offload/io_pool.h"

namespace ds::runtime {

class CommQueue {
 public:
  explicit CommQueue(bool background);
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
  // One thread, so ops run in submission order; its destructor runs what is still queued: an
  // engine being destroyed still owes its peers the ops it queued. Empty: ops run inline.
  std::optional<IoPool> thread_;
};

}  // namespace ds::runtime
