// The heartbeat loop. Memory is read here at send time, so the training loop never touches /proc.
#include "worker/heartbeater.h"

#include <cstdint>
#include <fstream>

namespace ds::worker {
namespace {

int64_t residentBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * 4096;
}

}  // namespace

Heartbeater::Heartbeater(CoordinatorClient& client, ProgressBoard& board,
                         std::chrono::milliseconds interval, std::chrono::milliseconds timeout,
                         std::function<void(const std::string&)> giveUp)
    : client_(client),
      board_(board),
      interval_(interval),
      timeout_(timeout),
      giveUp_(std::move(giveUp)) {
  board_.onMilestone([this] {
    {
      std::lock_guard lock(mutex_);
      beatNow_ = true;
    }
    wake_.notify_all();
  });
  thread_ = std::thread([this] { beat(); });
}

Heartbeater::~Heartbeater() { stop(); }

void Heartbeater::stop() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Heartbeater::beat() {
  std::unique_lock lock(mutex_);
  auto lastDelivered = std::chrono::steady_clock::now();
  while (!stop_) {
    lock.unlock();
    Progress progress = board_.snapshot();
    progress.residentBytes = residentBytes();
    const auto now = std::chrono::steady_clock::now();
    if (client_.heartbeat(progress))
      lastDelivered = now;
    else if (now - lastDelivered > timeout_)
      giveUp_("no heartbeat reached the coordinator for " +
              std::to_string(timeout_.count() / 1000.0).substr(0, 5) +
              " s (frozen or unreachable)");
    lock.lock();
    wake_.wait_for(lock, interval_, [&] { return stop_ || beatNow_; });
    beatNow_ = false;
  }
}

}  // namespace ds::worker
