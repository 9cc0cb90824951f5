// The node relay's local protocol: how a rank's worker talks to its node's relay
// (worker/node_relay.h) over a Unix socket, with no gRPC in between.
//
// Every frame is a 16-byte header and a payload. A request carries a serialized request message
// of proto/coordinator.proto; its reply carries the same call id, the gRPC status code the
// coordinator (or the relay) gave, and the serialized reply message, or the error text when the
// code is not OK. A Watch request is answered by Command frames (one serialized proto::Command
// each) and finally by a Watch frame whose status ends the stream. Both sides run on one machine
// and one build, so the header is in host byte order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ds::worker {

enum class CoordinatorMethod : uint8_t {
  Join = 1,
  KvSet,
  KvGet,
  KvWait,
  KvAdd,
  KvMultiSet,
  KvMultiGet,
  Heartbeat,
  Report,
  Watch,
  Offer,    // `ds-worker --join`: always direct, never through a relay
  Command,  // relay to rank only: one command of a Watch
};

// The gRPC method a request is forwarded to ("/ds.proto.Coordinator/KvSet"); "" for Command or
// an unknown value.
const char* grpcMethodPath(CoordinatorMethod method);
const char* methodName(CoordinatorMethod method);  // "KvSet", for messages

struct FrameHeader {
  uint32_t length = 0;      // payload bytes
  uint32_t call = 0;        // the caller's id; replies and commands repeat it
  uint32_t deadlineMs = 0;  // requests: how long the caller waits for the reply
  uint8_t method = 0;       // a CoordinatorMethod
  uint8_t status = 0;       // replies: a grpc::StatusCode (0 OK)
  uint16_t reserved = 0;
};
static_assert(sizeof(FrameHeader) == 16);

// Larger frames are refused (gRPC's own default limit is 4 MiB a message).
constexpr uint32_t kMaxFramePayload = 8u << 20;

// The relay's socket in Linux's abstract namespace: nothing on disk to clean up, gone with the
// process that bound it. `nonce` is ds-launch's per-launch --relay value, `node` the machine's
// name, so two jobs or two nodes on one machine (loopback tests) never share a relay.
std::string relaySocketName(const std::string& nonce, const std::string& node);

// Binds and listens on the relay's socket: the listening descriptor, or -1 when another process
// serves it already. Needs no gRPC, so a worker learns whether it is to host the relay before it
// loads any. Throws ds::Error for any other failure.
int listenOnRelaySocket(const std::string& socketName);
// Connects to the relay's socket: the connected descriptor, or -1 with errno set (nobody listens
// yet: ECONNREFUSED).
int connectToRelaySocket(const std::string& socketName);

// Frames out of a byte stream that arrives in pieces of any size, so that an event loop reads
// whatever a socket has in one call (one system call for many small frames, not two per frame).
class FrameBuffer {
 public:
  // The largest payload accepted (kMaxFramePayload unless lowered).
  void limitPayload(uint32_t bytes) { limit_ = bytes; }
  // Where the next read goes: at least 4 KiB, and room for the whole frame being read.
  std::pair<char*, size_t> space();
  void added(size_t bytes);
  // Takes the next complete frame; false when none is complete yet. Throws ds::Error for a frame
  // over the limit.
  bool next(FrameHeader& header, std::string& payload);

 private:
  std::vector<char> data_;
  size_t begin_ = 0, end_ = 0;  // the unread bytes
  uint32_t limit_ = kMaxFramePayload;
};

// A frame's bytes, header first, ready to write.
std::string encodeFrame(FrameHeader header, const std::string& payload);

// Blocking frame I/O on a socket, for the rank's side. Both throw ds::Error when the relay is
// gone; readFrame also when the peer sends an oversized frame.
void writeFrame(int fd, const FrameHeader& header, const std::string& payload);
FrameHeader readFrame(int fd, std::string& payload);

}  // namespace ds::worker
