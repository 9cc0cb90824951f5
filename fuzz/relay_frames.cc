// Fuzz target: the byte stream a node relay reads from a rank's Unix socket (any local process
// of the job's user can write it). The relay's side: FrameBuffer fed in pieces of varying sizes,
// with 64 KiB frames until a request shows the job token and 8 MiB after (as NodeRelay::Core
// does), each frame's request parsed as handle() parses it. The rank's side: readFrame on a
// socket carrying the same bytes. Every frame either side takes must be the input's own bytes.
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "common/error.h"
#include "coordinator.pb.h"
#include "fuzz/fuzz_target.h"
#include "worker/relay_protocol.h"

namespace ds::fuzz {
namespace {

using worker::FrameHeader;

constexpr const char* kToken = "fuzz-token";
constexpr uint32_t kUnauthenticatedFramePayload = 64 << 10;  // node_relay_core.h's

// The frame at `offset` of the input, re-encoded, is the input there.
void checkFrameAt(std::string_view input, size_t offset, const FrameHeader& header,
                  const std::string& payload) {
  const std::string frame = worker::encodeFrame(header, payload);
  DS_FUZZ_CHECK(offset + frame.size() <= input.size());
  DS_FUZZ_CHECK(input.compare(offset, frame.size(), frame) == 0);
}

// What NodeRelay::Core::handle reads of a frame before it forwards it.
bool authenticates(const FrameHeader& header, const std::string& payload) {
  proto::AnyRequest request;
  if (!request.ParseFromString(payload) || request.auth().token() != kToken) return false;
  switch (static_cast<worker::CoordinatorMethod>(header.method)) {
    case worker::CoordinatorMethod::Heartbeat: {
      proto::HeartbeatRequest beat;
      (void)beat.ParseFromString(payload);
      break;
    }
    case worker::CoordinatorMethod::Watch: {
      proto::WatchRequest watch;
      (void)watch.ParseFromString(payload);
      break;
    }
    default:
      (void)worker::methodName(static_cast<worker::CoordinatorMethod>(header.method));
      (void)worker::grpcMethodPath(static_cast<worker::CoordinatorMethod>(header.method));
  }
  return true;
}

void relaySide(std::string_view input) {
  worker::FrameBuffer buffer;
  buffer.limitPayload(kUnauthenticatedFramePayload);
  bool authenticated = false;
  size_t fed = 0, consumed = 0;
  FrameHeader header;
  std::string payload;
  while (fed < input.size()) {
    // Piece sizes from 1 to 4096 bytes, a function of the position: frames split anywhere.
    const size_t piece = 1 + (fed * 2654435761u >> 7) % 4096;
    const auto [space, room] = buffer.space();
    DS_FUZZ_CHECK(room >= 4096 || room >= input.size() - fed);
    const size_t n = std::min({piece, room, input.size() - fed});
    std::memcpy(space, input.data() + fed, n);
    buffer.added(n);
    fed += n;
    try {
      while (buffer.next(header, payload)) {
        checkFrameAt(input, consumed, header, payload);
        consumed += sizeof header + payload.size();
        if (!authenticated && authenticates(header, payload)) {
          authenticated = true;
          buffer.limitPayload(worker::kMaxFramePayload);
        }
      }
    } catch (const Error&) {
      return;  // an oversized frame: the relay drops the connection
    }
  }
}

void rankSide(std::string_view input) {
  if (input.size() > (64 << 10)) return;  // fits the socket's buffer: written before reading
  int fds[2];
  DS_FUZZ_CHECK(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0);
  DS_FUZZ_CHECK(::send(fds[1], input.data(), input.size(), MSG_NOSIGNAL) ==
                static_cast<ssize_t>(input.size()));
  ::shutdown(fds[1], SHUT_WR);
  size_t consumed = 0;
  try {
    for (;;) {
      std::string payload;
      const FrameHeader header = worker::readFrame(fds[0], payload);
      checkFrameAt(input, consumed, header, payload);
      consumed += sizeof header + payload.size();
    }
  } catch (const Error&) {
    // The end of the stream, or an oversized frame: both are how a rank sees its relay go.
  }
  ::close(fds[0]);
  ::close(fds[1]);
}

void fuzzRelayFrames(std::string_view input) {
  relaySide(input);
  rankSide(input);
}

}  // namespace

DS_FUZZ_TARGET(relay_frames, fuzzRelayFrames);

}  // namespace ds::fuzz
