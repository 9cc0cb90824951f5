#include "worker/relay_protocol.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>

#include "common/error.h"
#include "common/fnv1a.h"

namespace ds::worker {

namespace {

struct MethodInfo {
  CoordinatorMethod method;
  const char* name;
  const char* path;
};

constexpr MethodInfo kMethods[] = {
    {CoordinatorMethod::Join, "Join", "/ds.proto.Coordinator/Join"},
    {CoordinatorMethod::KvSet, "KvSet", "/ds.proto.Coordinator/KvSet"},
    {CoordinatorMethod::KvGet, "KvGet", "/ds.proto.Coordinator/KvGet"},
    {CoordinatorMethod::KvWait, "KvWait", "/ds.proto.Coordinator/KvWait"},
    {CoordinatorMethod::KvAdd, "KvAdd", "/ds.proto.Coordinator/KvAdd"},
    {CoordinatorMethod::KvMultiSet, "KvMultiSet", "/ds.proto.Coordinator/KvMultiSet"},
    {CoordinatorMethod::KvMultiGet, "KvMultiGet", "/ds.proto.Coordinator/KvMultiGet"},
    {CoordinatorMethod::Heartbeat, "Heartbeat", "/ds.proto.Coordinator/Heartbeat"},
    {CoordinatorMethod::Report, "Report", "/ds.proto.Coordinator/Report"},
    {CoordinatorMethod::Watch, "Watch", "/ds.proto.Coordinator/Watch"},
    {CoordinatorMethod::Offer, "Offer", "/ds.proto.Coordinator/Offer"},
    {CoordinatorMethod::Command, "Command", ""},
};

const MethodInfo* infoOf(CoordinatorMethod method) {
  for (const auto& info : kMethods)
    if (info.method == method) return &info;
  return nullptr;
}

void sendAll(int fd, const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::send(fd, p, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Error(std::string("node relay: connection lost: ") + std::strerror(errno));
    p += n;
    size -= static_cast<size_t>(n);
  }
}

void receiveAll(int fd, void* data, size_t size) {
  char* p = static_cast<char*>(data);
  while (size > 0) {
    const ssize_t n = ::recv(fd, p, size, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) throw Error("node relay: connection closed");
    if (n < 0) throw Error(std::string("node relay: connection lost: ") + std::strerror(errno));
    p += n;
    size -= static_cast<size_t>(n);
  }
}

// The relay's socket address in the abstract namespace, and its length.
std::pair<sockaddr_un, socklen_t> relayAddress(const std::string& socketName) {
  sockaddr_un address{};
  if (socketName.size() > sizeof address.sun_path) throw Error("node relay: socket name too long");
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, socketName.data(), socketName.size());
  return {address, static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + socketName.size())};
}

void checkFrameLength(size_t length, size_t limit = kMaxFramePayload) {
  if (length > limit)
    throw Error("node relay: a " + std::to_string(length) + "-byte frame is over the limit of " +
                std::to_string(limit));
}

}  // namespace

const char* grpcMethodPath(CoordinatorMethod method) {
  const MethodInfo* info = infoOf(method);
  return info ? info->path : "";
}

const char* methodName(CoordinatorMethod method) {
  const MethodInfo* info = infoOf(method);
  return info ? info->name : "unknown";
}

std::string relaySocketName(const std::string& nonce, const std::string& node) {
  // sun_path holds 107 bytes: the node name is hashed so any host name fits.
  return std::string(1, '\0') + "ds-relay-" + nonce.substr(0, 32) + "-" +
         hex64(fnv1a64(node.data(), node.size()));
}

std::pair<char*, size_t> FrameBuffer::space() {
  constexpr size_t kReadSize = 4 << 10;  // a page: thousands of connections each hold one
  size_t wanted = kReadSize;
  if (end_ - begin_ >= sizeof(FrameHeader)) {
    FrameHeader header;
    std::memcpy(&header, data_.data() + begin_, sizeof header);
    if (header.length <= limit_)
      wanted = std::max(wanted, sizeof header + header.length - (end_ - begin_));
  }
  if (begin_ == end_) begin_ = end_ = 0;
  if (data_.size() - end_ < wanted) {
    // Move the unread bytes to the front before growing. Not when there is nothing before them:
    // the first call's buffer is empty and its data() null, which memmove may not be given even
    // for 0 bytes (found by fuzz/relay_frames.cc under UBSan).
    if (begin_ > 0) {
      std::memmove(data_.data(), data_.data() + begin_, end_ - begin_);
      end_ -= begin_;
      begin_ = 0;
    }
    if (data_.size() - end_ < wanted) data_.resize(end_ + wanted);
  }
  return {data_.data() + end_, data_.size() - end_};
}

void FrameBuffer::added(size_t bytes) { end_ += bytes; }

bool FrameBuffer::next(FrameHeader& header, std::string& payload) {
  if (end_ - begin_ < sizeof header) return false;
  std::memcpy(&header, data_.data() + begin_, sizeof header);
  checkFrameLength(header.length, limit_);
  if (end_ - begin_ < sizeof header + header.length) return false;
  payload.assign(data_.data() + begin_ + sizeof header, header.length);
  begin_ += sizeof header + header.length;
  return true;
}

std::string encodeFrame(FrameHeader header, const std::string& payload) {
  header.length = static_cast<uint32_t>(payload.size());
  std::string bytes(sizeof header + payload.size(), '\0');
  std::memcpy(bytes.data(), &header, sizeof header);
  std::memcpy(bytes.data() + sizeof header, payload.data(), payload.size());
  return bytes;
}

int listenOnRelaySocket(const std::string& socketName) {
  auto [address, length] = relayAddress(socketName);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw Error(std::string("node relay: socket: ") + std::strerror(errno));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), length) != 0) {
    const int error = errno;
    ::close(fd);
    if (error == EADDRINUSE) return -1;
    throw Error(std::string("node relay: cannot bind its socket: ") + std::strerror(error));
  }
  if (::listen(fd, SOMAXCONN) != 0) {
    const int error = errno;
    ::close(fd);
    throw Error(std::string("node relay: listen: ") + std::strerror(error));
  }
  return fd;
}

int connectToRelaySocket(const std::string& socketName) {
  auto [address, length] = relayAddress(socketName);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), length) == 0) return fd;
  const int error = errno;
  ::close(fd);
  errno = error;
  return -1;
}

void writeFrame(int fd, const FrameHeader& header, const std::string& payload) {
  checkFrameLength(payload.size());
  const std::string frame = encodeFrame(header, payload);
  sendAll(fd, frame.data(), frame.size());  // one system call, not two
}

FrameHeader readFrame(int fd, std::string& payload) {
  FrameHeader header;
  receiveAll(fd, &header, sizeof header);
  checkFrameLength(header.length);
  payload.resize(header.length);
  receiveAll(fd, payload.data(), payload.size());
  return header;
}

}  // namespace ds::worker
