// The route through the node relay: one Unix socket, calls multiplexed by id. A reader thread
// hands each reply to the caller waiting for it and each command to the watcher; when the relay
// goes away every waiting call fails and the command stream ends, as a broken gRPC channel would.
#include <grpcpp/support/status_code_enum.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstddef>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "common/error.h"
#include "worker/coordinator_transport.h"

namespace ds::worker {
namespace {

// gRPC's codes (the enum's header alone: no gRPC library behind it).
constexpr int kDeadlineExceeded = grpc::StatusCode::DEADLINE_EXCEEDED;
constexpr int kUnavailable = grpc::StatusCode::UNAVAILABLE;
constexpr int kInternal = grpc::StatusCode::INTERNAL;

using Clock = std::chrono::steady_clock;

class RelayTransport final : public CoordinatorTransport {
 public:
  explicit RelayTransport(std::string socketName) : socketName_(std::move(socketName)) {}

  ~RelayTransport() override {
    {
      std::lock_guard lock(mutex_);
      if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
    }
    if (reader_.joinable()) reader_.join();
    if (fd_ >= 0) ::close(fd_);
  }

  TransportStatus call(CoordinatorMethod method, const google::protobuf::Message& request,
                       google::protobuf::Message* reply, std::chrono::milliseconds deadline,
                       bool waitForReady) override {
    const auto until = Clock::now() + deadline;
    if (TransportStatus connected = connect(waitForReady ? until : Clock::now()); !connected.ok())
      return connected;
    std::unique_lock lock(mutex_);
    const uint32_t id = nextCall_++;
    pending_[id];
    lock.unlock();
    if (TransportStatus sent = send(method, id, request, deadline); !sent.ok()) {
      lock.lock();
      pending_.erase(id);
      return sent;
    }
    lock.lock();
    changed_.wait_until(lock, until, [&] { return pending_[id].has_value(); });
    std::optional<Reply> answer = std::move(pending_[id]);
    pending_.erase(id);
    lock.unlock();
    if (!answer)
      return {kDeadlineExceeded, std::string("no answer from the node relay to ") +
                                     methodName(method) + " in time"};
    if (answer->status != 0) return {answer->status, answer->payload};
    if (reply != nullptr && !reply->ParseFromString(answer->payload))
      return {kInternal, std::string("node relay: unreadable ") + methodName(method) + " reply"};
    return {};
  }

  TransportStatus watch(const proto::WatchRequest& request,
                        const std::function<void(const proto::Command&)>& onCommand) override {
    if (TransportStatus connected = connect(Clock::now()); !connected.ok()) return connected;
    std::unique_lock lock(mutex_);
    const uint32_t id = nextCall_++;
    watchCall_ = id;
    lock.unlock();
    if (TransportStatus sent = send(CoordinatorMethod::Watch, id, request, {}); !sent.ok())
      return sent;
    lock.lock();
    while (true) {
      changed_.wait(lock, [&] { return !commands_.empty() || watchEnd_.has_value(); });
      if (!commands_.empty()) {
        const std::string payload = std::move(commands_.front());
        commands_.pop_front();
        lock.unlock();
        proto::Command command;
        if (command.ParseFromString(payload)) onCommand(command);
        lock.lock();
        continue;
      }
      return *watchEnd_;
    }
  }

 private:
  struct Reply {
    int status = 0;
    std::string payload;
  };

  // Connects once; retries until `until` while nobody listens yet (the relay's host is starting).
  TransportStatus connect(Clock::time_point until) {
    std::lock_guard connecting(connectMutex_);
    {
      std::lock_guard lock(mutex_);
      if (fd_ >= 0) return {};
      if (gone_) return *gone_;
    }
    while (true) {
      const int fd = connectToRelaySocket(socketName_);
      if (fd >= 0) {
        std::lock_guard lock(mutex_);
        fd_ = fd;
        reader_ = std::thread([this] { readReplies(); });
        return {};
      }
      if (Clock::now() >= until)
        return {kUnavailable,
                std::string("the node relay is not listening: ") + std::strerror(errno)};
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  TransportStatus send(CoordinatorMethod method, uint32_t id,
                       const google::protobuf::Message& request,
                       std::chrono::milliseconds deadline) {
    FrameHeader header;
    header.call = id;
    header.method = static_cast<uint8_t>(method);
    header.deadlineMs = static_cast<uint32_t>(std::max<int64_t>(0, deadline.count()));
    try {
      const std::string payload = request.SerializeAsString();
      std::lock_guard lock(writeMutex_);
      writeFrame(fd_, header, payload);
    } catch (const Error& e) {
      return {kUnavailable, e.what()};
    }
    return {};
  }

  void readReplies() {
    std::string why;
    try {
      while (true) {
        std::string payload;
        const FrameHeader header = readFrame(fd_, payload);
        std::lock_guard lock(mutex_);
        const auto method = static_cast<CoordinatorMethod>(header.method);
        if (method == CoordinatorMethod::Command && header.call == watchCall_) {
          commands_.push_back(std::move(payload));
        } else if (method == CoordinatorMethod::Watch && header.call == watchCall_) {
          watchEnd_ = TransportStatus{header.status, header.status == 0 ? "" : payload};
        } else if (auto it = pending_.find(header.call); it != pending_.end()) {
          it->second = Reply{header.status, std::move(payload)};
        }
        changed_.notify_all();
      }
    } catch (const Error& e) {
      why = e.what();
    }
    std::lock_guard lock(mutex_);
    gone_ = TransportStatus{kUnavailable, "the node relay went away (" + why + ")"};
    for (auto& [id, slot] : pending_)
      if (!slot) slot = Reply{gone_->code, gone_->message};
    if (!watchEnd_) watchEnd_ = gone_;
    changed_.notify_all();
  }

  const std::string socketName_;
  std::mutex connectMutex_;  // one connect at a time; taken before mutex_
  std::mutex writeMutex_;    // one frame at a time on the socket
  std::mutex mutex_;         // everything below
  std::condition_variable changed_;
  int fd_ = -1;
  std::thread reader_;
  uint32_t nextCall_ = 1;
  std::map<uint32_t, std::optional<Reply>> pending_;
  uint32_t watchCall_ = 0;
  std::deque<std::string> commands_;
  std::optional<TransportStatus> watchEnd_;
  std::optional<TransportStatus> gone_;
};

}  // namespace

std::unique_ptr<CoordinatorTransport> makeRelayTransport(const std::string& socketName) {
  return std::make_unique<RelayTransport>(socketName);
}

}  // namespace ds::worker
