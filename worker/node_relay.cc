// NodeRelay's local half: the node's ranks on the Unix socket (Boost.Asio), their frames, the
// heartbeats answered here and the commands handed to their watches; and NodeRelay itself. The
// upstream half is in node_relay_upstream.cc, the state both share in node_relay_core.h.
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "common/constant_time.h"
#include "common/error.h"
#include "worker/coordinator_channel.h"
#include "worker/node_relay_core.h"

namespace ds::worker {

namespace asio = boost::asio;

void NodeRelay::Core::postTo(const std::weak_ptr<Core>& weak, std::function<void(Core&)> work) {
  postTo(weak.lock(), std::move(work));
}

void NodeRelay::Core::postTo(std::shared_ptr<Core> core, std::function<void(Core&)> work) {
  if (!core) return;
  // The reference moves into the handler, even when closed: a gRPC thread that released the last
  // one would destroy the channel from inside its own callback, which aborts in gRPC. The io
  // context is still running here: closing waits for every call's callback to finish.
  asio::io_context& io = core->io;
  asio::post(io, [core = std::move(core), work = std::move(work)] {
    if (!core->closed) work(*core);
  });
}

void NodeRelay::Core::listen() {
  int fd = options.listeningFd;
  if (fd < 0) fd = listenOnRelaySocket(options.socketName);
  if (fd < 0) throw Error("node relay: its socket is taken: another process serves this node");
  acceptor.assign(Local(), fd);
  channel = makeCoordinatorChannel(options.coordinatorAddress, options.tls, options.keepalive);
  stub = proto::Coordinator::NewStub(channel);
  generic = std::make_unique<grpc::GenericStub>(channel);
  accept();
}

void NodeRelay::Core::accept() {
  auto connection = std::make_shared<Connection>(io);
  acceptor.async_accept(connection->socket, [self = shared_from_this(),
                                             connection](const boost::system::error_code& error) {
    if (error) return;  // closed
    fcntl(connection->socket.native_handle(), F_SETFD, FD_CLOEXEC);
    ucred peer{};
    socklen_t size = sizeof peer;
    const bool known =
        getsockopt(connection->socket.native_handle(), SOL_SOCKET, SO_PEERCRED, &peer, &size) == 0;
    // Another user's process never speaks for a rank of this job.
    if (!known || peer.uid != geteuid() || self->unauthenticated >= kMaxUnauthenticated) {
      boost::system::error_code ignored;
      connection->socket.close(ignored);
      return self->accept();
    }
    connection->host = peer.pid == getpid();
    connection->in.limitPayload(kUnauthenticatedFramePayload);
    ++self->unauthenticated;
    self->connections.insert(connection);
    self->connectionCount = self->connections.size();
    self->readMore(connection);
    self->accept();
  });
}

void NodeRelay::Core::readMore(const ConnectionPtr& c) {
  const auto [data, size] = c->in.space();
  c->socket.async_read_some(
      asio::buffer(data, size),
      [self = shared_from_this(), c](const boost::system::error_code& error, size_t bytes) {
        if (error) return self->drop(c);
        c->in.added(bytes);
        try {
          while (c->open && c->in.next(c->header, c->payload)) self->handle(c);
        } catch (const Error&) {  // an oversized frame: not a rank of ours
          return self->drop(c);
        }
        if (c->open) self->readMore(c);
      });
}

void NodeRelay::Core::send(const ConnectionPtr& c, const FrameHeader& header,
                           const std::string& payload) {
  if (!c->open) return;
  c->writes.push_back(encodeFrame(header, payload));
  ++queued;
  pumpWrites(c);
}

void NodeRelay::Core::pumpWrites(const ConnectionPtr& c) {
  if (c->writing || c->writes.empty() || !c->open) return;
  c->writing = true;
  std::vector<asio::const_buffer> buffers;
  for (const auto& frame : c->writes) buffers.push_back(asio::buffer(frame));
  asio::async_write(c->socket, buffers,
                    [self = shared_from_this(), c, count = buffers.size()](
                        const boost::system::error_code& error, size_t) {
                      c->writing = false;
                      if (error) {
                        self->queued -= c->writes.size();
                        c->writes.clear();
                        return self->drop(c);
                      }
                      c->writes.erase(c->writes.begin(), c->writes.begin() + count);
                      self->queued -= count;
                      self->pumpWrites(c);
                    });
}

void NodeRelay::Core::reply(const ConnectionPtr& c, uint32_t call, CoordinatorMethod method,
                            int status, const std::string& payload) {
  FrameHeader header;
  header.call = call;
  header.method = static_cast<uint8_t>(method);
  header.status = static_cast<uint8_t>(status);
  send(c, header, payload);
}

void NodeRelay::Core::drop(const ConnectionPtr& c) {
  if (!c->open) return;
  c->open = false;
  if (!c->writing) {  // else the write in flight still reads them; it clears them
    queued -= c->writes.size();
    c->writes.clear();
  }
  boost::system::error_code ignored;
  c->socket.close(ignored);
  connections.erase(c);
  connectionCount = connections.size();
  if (!c->authenticated) --unauthenticated;
  if (c->rank >= 0) {
    beats.erase(c->rank);
    if (!c->reported) {
      pendingUp.add_lost(c->rank);
      sendUp();
    }
  }
}

void NodeRelay::Core::handle(const ConnectionPtr& c) {
  const auto method = static_cast<CoordinatorMethod>(c->header.method);
  const uint32_t call = c->header.call;
  if (!c->authenticated) {
    proto::AnyRequest request;
    if (!request.ParseFromString(c->payload) ||
        !constantTimeEquals(request.auth().token(), options.token))
      return reply(c, call, method, grpc::StatusCode::PERMISSION_DENIED, "wrong job token");
    c->authenticated = true;
    --unauthenticated;
    c->in.limitPayload(kMaxFramePayload);
  }
  switch (method) {
    case CoordinatorMethod::Heartbeat:
      return heartbeat(c, call);
    case CoordinatorMethod::Watch:
      return watch(c, call);
    case CoordinatorMethod::Join:
      ++joinsSeen;
      return joins.add(*this, c, method);
    case CoordinatorMethod::KvSet:
    case CoordinatorMethod::KvMultiSet:
      return sets.add(*this, c, method);
    case CoordinatorMethod::KvGet:
    case CoordinatorMethod::KvWait:
    case CoordinatorMethod::KvAdd:
    case CoordinatorMethod::KvMultiGet:
    case CoordinatorMethod::Report:
      return forward({c, call, method, c->payload, c->header.deadlineMs});
    default:
      return reply(c, call, method, grpc::StatusCode::UNIMPLEMENTED,
                   std::string("the node relay does not carry ") + methodName(method));
  }
}

void NodeRelay::Core::heartbeat(const ConnectionPtr& c, uint32_t call) {
  proto::HeartbeatRequest beat;
  if (!beat.ParseFromString(c->payload) || !constantTimeEquals(beat.auth().token(), options.token))
    return reply(c, call, CoordinatorMethod::Heartbeat, grpc::StatusCode::PERMISSION_DENIED,
                 "wrong job token");
  if (c->rank < 0 || beat.rank() != c->rank)
    return reply(c, call, CoordinatorMethod::Heartbeat, grpc::StatusCode::FAILED_PRECONDITION,
                 "heartbeat for rank " + std::to_string(beat.rank()) +
                     " on a connection that did not join as it");
  if (sessionEnd)
    return reply(c, call, CoordinatorMethod::Heartbeat, grpc::StatusCode::UNAVAILABLE,
                 "the node relay lost the coordinator: " + sessionEnd->error_message());
  const int rank = beat.rank();
  const auto last = lastBeat.find(rank);
  // A state change or a first step goes up at once: the launcher's view and its start-up
  // figure should not lag an interval behind.
  const bool urgent = last == lastBeat.end() || last->second.first != beat.state() ||
                      (last->second.second == 0 && beat.step() > 0);
  lastBeat[rank] = {beat.state(), beat.step()};
  beat.clear_auth();
  beats[rank] = {std::move(beat), std::chrono::steady_clock::now()};
  reply(c, call, CoordinatorMethod::Heartbeat, grpc::StatusCode::OK, "");
  if (urgent) flushBeats();
}

void NodeRelay::Core::watch(const ConnectionPtr& c, uint32_t call) {
  proto::WatchRequest request;
  if (!request.ParseFromString(c->payload) ||
      !constantTimeEquals(request.auth().token(), options.token))
    return reply(c, call, CoordinatorMethod::Watch, grpc::StatusCode::PERMISSION_DENIED,
                 "wrong job token");
  if (c->rank < 0 || request.rank() != c->rank || c->watchCall != 0)
    return reply(c, call, CoordinatorMethod::Watch, grpc::StatusCode::FAILED_PRECONDITION,
                 "watch for rank " + std::to_string(request.rank()) +
                     " on a connection that did not join as it, or watches already");
  c->watchCall = call;
  pendingUp.add_attach(c->rank);
  sendUp();
  for (const auto& command : commands) sendCommand(c, command);
  if (sessionEnd) endWatch(c);
}

void NodeRelay::Core::sendCommand(const ConnectionPtr& c, const proto::Command& command) {
  FrameHeader header;
  header.call = c->watchCall;
  header.method = static_cast<uint8_t>(CoordinatorMethod::Command);
  send(c, header, command.SerializeAsString());
}

void NodeRelay::Core::endWatch(const ConnectionPtr& c) {
  reply(c, c->watchCall, CoordinatorMethod::Watch, sessionEnd->error_code(),
        sessionEnd->error_message());
}

void NodeRelay::Core::deliver(const proto::Command& command) {
  commands.push_back(command);
  for (const auto& c : connections)
    if (c->watchCall != 0) sendCommand(c, command);
}

void NodeRelay::Core::close() {
  boost::system::error_code ignored;
  acceptor.close(ignored);
  beatTimer.cancel();
  for (const auto& c : std::vector<ConnectionPtr>(connections.begin(), connections.end())) {
    c->open = false;
    c->socket.close(ignored);
  }
  connections.clear();
  connectionCount = 0;
  unauthenticated = 0;
  cancelUpstream();
}

NodeRelay::NodeRelay(asio::io_context& io, NodeRelayOptions options)
    : core_(std::make_shared<Core>(io, std::move(options))) {
  core_->listen();
}

NodeRelay::~NodeRelay() {
  // After this, work a gRPC callback posts is dropped on the io thread (postTo).
  core_->closed = true;
  asio::post(core_->io, [core = core_] { core->close(); });
}

size_t NodeRelay::connections() const { return core_->connectionCount; }
size_t NodeRelay::joinsSeen() const { return core_->joinsSeen; }
bool NodeRelay::sessionEnded() const { return core_->ended; }
size_t NodeRelay::queuedWrites() const { return core_->queued; }

void closeRelays(std::vector<std::unique_ptr<NodeRelay>> relays) {
  std::vector<std::shared_ptr<std::atomic<int>>> inFlight;
  // The channels stay alive here until every call's callback is done: a call's ClientContext
  // holds its channel, and the channel destroyed from a gRPC callback thread (the context of the
  // last call being its last owner) shuts its completion queue down from inside that queue's own
  // thread, which aborts in gRPC.
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (const auto& relay : relays) {
    inFlight.push_back(relay->core_->inFlight);
    channels.push_back(relay->core_->channel);
  }
  relays.clear();  // each one's close runs on the io thread and cancels its gRPC calls
  for (const auto& calls : inFlight)
    while (*calls > 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

}  // namespace ds::worker
