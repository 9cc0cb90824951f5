// Heartbeater: a rank's heartbeats, on their own thread. Every interval, and at once on the
// progress board's milestones, it sends the board's progress with the process's resident memory;
// when none has reached the coordinator for the heartbeat timeout it gives up.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "worker/coordinator_client.h"
#include "worker/progress_board.h"

namespace ds::worker {

class Heartbeater {
 public:
  // Starts the thread and takes the board's milestone callback (no milestone may follow this
  // object's end).
  // `giveUp` runs on the thread with the reason when the timeout passes; the coordinator has
  // counted the rank failed by then, so it is expected not to return (the worker exits).
  Heartbeater(CoordinatorClient& client, ProgressBoard& board, std::chrono::milliseconds interval,
              std::chrono::milliseconds timeout, std::function<void(const std::string&)> giveUp);
  ~Heartbeater();
  Heartbeater(const Heartbeater&) = delete;
  Heartbeater& operator=(const Heartbeater&) = delete;

  // No heartbeat after this returns: the thread has ended (the final report goes next).
  void stop();

 private:
  void beat();

  CoordinatorClient& client_;
  ProgressBoard& board_;
  const std::chrono::milliseconds interval_, timeout_;
  const std::function<void(const std::string&)> giveUp_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false, beatNow_ = false;
  std::thread thread_;  // last: started once the rest is set
};

}  // namespace ds::worker
