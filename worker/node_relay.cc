// NodeRelay on Boost.Asio (the local side) and gRPC's callback API (the upstream side).
#include "worker/node_relay.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio.hpp>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "common/constant_time.h"
#include "common/error.h"
#include "coordinator.grpc.pb.h"
#include "worker/coordinator_channel.h"
#include "worker/relay_protocol.h"

namespace ds::worker {

namespace asio = boost::asio;
using Local = asio::local::stream_protocol;

struct NodeRelay::Core : std::enable_shared_from_this<Core> {
  // One rank's local connection.
  struct Connection {
    explicit Connection(asio::io_context& io) : socket(io) {}
    Local::socket socket;
    FrameBuffer in;
    FrameHeader header;  // the frame being handled
    std::string payload;
    std::deque<std::string> writes;
    bool writing = false, open = true;
    bool host = false;      // the relay's own process: the rank it joins as hosts the relay
    int rank = -1;          // known once its Join went through
    bool reported = false;  // its Report went through: its exit is not a loss
    uint32_t watchCall = 0; // its Watch's call id, 0 while it has none
  };
  using ConnectionPtr = std::shared_ptr<Connection>;

  // The NodeSession stream. It keeps itself alive until gRPC is done with it.
  class Session final : public grpc::ClientBidiReactor<proto::NodeUp, proto::Command> {
   public:
    Session(std::weak_ptr<Core> core, std::shared_ptr<std::atomic<int>> inFlight)
        : core_(std::move(core)), inFlight_(std::move(inFlight)) {
      ++*inFlight_;
    }
    void start(proto::Coordinator::Stub& stub, std::shared_ptr<Session> self) {
      self_ = std::move(self);
      stub.async()->NodeSession(&context_, this);
      StartRead(&command_);
      StartCall();
    }
    void write(proto::NodeUp up) {
      up_ = std::move(up);
      StartWrite(&up_);
    }
    void cancel() { context_.TryCancel(); }
    void OnReadDone(bool ok) override {
      if (!ok) return;  // OnDone follows
      Core::postTo(core_, [command = command_](Core& core) { core.deliver(command); });
      StartRead(&command_);
    }
    void OnWriteDone(bool ok) override {
      Core::postTo(core_, [ok](Core& core) { core.upstreamWritten(ok); });
    }
    void OnDone(const grpc::Status& status) override {
      Core::postTo(core_, [status](Core& core) { core.sessionDone(status); });
      const std::shared_ptr<std::atomic<int>> inFlight = inFlight_;
      self_.reset();  // deletes this
      --*inFlight;
    }

   private:
    // Weak: a gRPC thread must never hold the last reference to what the io thread owns.
    std::weak_ptr<Core> core_;
    std::shared_ptr<std::atomic<int>> inFlight_;
    std::shared_ptr<Session> self_;
    grpc::ClientContext context_;
    proto::Command command_;
    proto::NodeUp up_;
  };

  Core(asio::io_context& io, NodeRelayOptions o)
      : io(io), options(std::move(o)), acceptor(io), beatTimer(io) {}

  // From a gRPC thread: runs `work` on the io thread unless the relay is gone or closed. The
  // strong reference lives in the posted handler, on the io side.
  static void postTo(const std::weak_ptr<Core>& weak, std::function<void(Core&)> work) {
    std::shared_ptr<Core> core = weak.lock();
    if (!core) return;
    std::lock_guard lock(core->postMutex);
    if (!core->closed)
      asio::post(core->io, [core, work = std::move(work)] { work(*core); });
  }

  void listen() {
    int fd = options.listeningFd;
    if (fd < 0) fd = listenOnRelaySocket(options.socketName);
    if (fd < 0)
      throw RelaySocketTaken("node relay: its socket is taken: another process serves this node");
    acceptor.assign(Local(), fd);
    channel = makeCoordinatorChannel(options.coordinatorAddress, options.tls, options.keepalive);
    stub = proto::Coordinator::NewStub(channel);
    generic = std::make_unique<grpc::GenericStub>(channel);
    accept();
  }

  void accept() {
    auto connection = std::make_shared<Connection>(io);
    acceptor.async_accept(connection->socket, [self = shared_from_this(), connection](
                                                  const boost::system::error_code& error) {
      if (error) return;  // closed
      fcntl(connection->socket.native_handle(), F_SETFD, FD_CLOEXEC);
      ucred peer{};
      socklen_t size = sizeof peer;
      connection->host = getsockopt(connection->socket.native_handle(), SOL_SOCKET, SO_PEERCRED,
                                    &peer, &size) == 0 &&
                         peer.pid == getpid();
      self->connections.insert(connection);
      self->connectionCount = self->connections.size();
      self->readMore(connection);
      self->accept();
    });
  }

  // Reads whatever the socket has and handles every complete frame in it.
  void readMore(const ConnectionPtr& c) {
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

  void send(const ConnectionPtr& c, const FrameHeader& header, const std::string& payload) {
    if (!c->open) return;
    c->writes.push_back(encodeFrame(header, payload));
    ++queued;
    pumpWrites(c);
  }

  // Everything queued for a rank goes out in one write.
  void pumpWrites(const ConnectionPtr& c) {
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

  void reply(const ConnectionPtr& c, uint32_t call, CoordinatorMethod method, int status,
             const std::string& payload) {
    FrameHeader header;
    header.call = call;
    header.method = static_cast<uint8_t>(method);
    header.status = static_cast<uint8_t>(status);
    send(c, header, payload);
  }

  // A local connection ended: its rank is lost unless it reported.
  void drop(const ConnectionPtr& c) {
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
    if (c->rank >= 0) {
      beats.erase(c->rank);
      if (!c->reported) {
        pendingUp.add_lost(c->rank);
        sendUp();
      }
    }
  }

  void handle(const ConnectionPtr& c) {
    const auto method = static_cast<CoordinatorMethod>(c->header.method);
    const uint32_t call = c->header.call;
    switch (method) {
      case CoordinatorMethod::Heartbeat:
        return heartbeat(c, call);
      case CoordinatorMethod::Watch:
        return watch(c, call);
      case CoordinatorMethod::Join:
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

  // One rank's call on its way up.
  struct Call {
    std::weak_ptr<Connection> connection;
    uint32_t call;
    CoordinatorMethod method;
    std::string payload;
    uint32_t deadlineMs;
  };

  // One gRPC call; `done(code, reply bytes or error text)` runs on the io thread.
  void upstream(const char* path, const std::string& request, uint32_t deadlineMs,
                bool waitForReady, std::function<void(Core&, int, const std::string&)> done) {
    struct Pending {
      grpc::ClientContext context;
      grpc::ByteBuffer request, response;
    };
    auto p = std::make_shared<Pending>();
    p->context.set_deadline(std::chrono::system_clock::now() +
                            std::chrono::milliseconds(deadlineMs));
    p->context.set_wait_for_ready(waitForReady);
    grpc::Slice slice(request);
    p->request = grpc::ByteBuffer(&slice, 1);
    {
      std::lock_guard lock(forwardsMutex);
      forwards.insert(&p->context);
    }
    ++*inFlight;
    generic->UnaryCall(&p->context, path, grpc::StubOptions(), &p->request, &p->response,
                       [weak = weak_from_this(), p, done = std::move(done),
                        inFlight = inFlight](grpc::Status status) {
                         std::string payload =
                             status.ok() ? bytesOf(p->response) : status.error_message();
                         if (auto core = weak.lock()) {
                           std::lock_guard lock(core->forwardsMutex);
                           core->forwards.erase(&p->context);
                         }
                         postTo(weak, [done, code = status.error_code(),
                                       payload = std::move(payload)](Core& core) {
                           done(core, code, payload);
                         });
                         --*inFlight;
                       });
  }

  // Upstream unchanged, answered as the coordinator answers.
  void forward(Call call) {
    // The coordinator may still be starting when the first ranks join.
    const bool waitForReady = call.method == CoordinatorMethod::Join;
    upstream(grpcMethodPath(call.method), call.payload, call.deadlineMs, waitForReady,
             [call](Core& core, int code, const std::string& payload) {
               if (auto c = call.connection.lock())
                 core.answered(c, call.call, call.method, code, payload);
             });
  }

  // Calls of one kind that go up as one request: the first at once, those that arrive while it
  // is out together when it returns. Under load that is one request per node; alone, no delay.
  class Batch {
   public:
    // Sends `calls` as one request; each gets its answer through core.answered.
    using Send = void (Core::*)(std::vector<Call> calls);
    explicit Batch(Send send) : send_(send) {}
    void add(Core& core, const ConnectionPtr& c, CoordinatorMethod method) {
      waiting_.push_back({c, c->header.call, method, c->payload, c->header.deadlineMs});
      pump(core);
    }
    void returned(Core& core) {
      inFlight_ = false;
      pump(core);
    }

   private:
    void pump(Core& core) {
      if (inFlight_ || waiting_.empty()) return;
      inFlight_ = true;
      (core.*send_)(std::exchange(waiting_, {}));
    }
    Send send_;
    bool inFlight_ = false;
    std::vector<Call> waiting_;
  };

  static uint32_t longestDeadline(const std::vector<Call>& calls) {
    uint32_t longest = 0;
    for (const auto& call : calls) longest = std::max(longest, call.deadlineMs);
    return longest;
  }

  void sendJoins(std::vector<Call> waiting) {
    proto::NodeJoinRequest request;
    std::vector<Call> calls;
    for (auto& call : waiting) {
      if (request.add_joins()->ParseFromString(call.payload)) {
        calls.push_back(std::move(call));
        continue;
      }
      request.mutable_joins()->RemoveLast();
      if (auto c = call.connection.lock())
        reply(c, call.call, CoordinatorMethod::Join, grpc::StatusCode::INVALID_ARGUMENT,
              "unreadable join request");
    }
    if (calls.empty()) return joins.returned(*this);
    upstream("/ds.proto.Coordinator/NodeJoin", request.SerializeAsString(),
             longestDeadline(calls), true,
             [calls](Core& core, int code, const std::string& payload) {
               proto::NodeJoinReply reply;
               if (code == grpc::StatusCode::OK &&
                   (!reply.ParseFromString(payload) ||
                    reply.results_size() != static_cast<int>(calls.size())))
                 code = grpc::StatusCode::INTERNAL;
               for (size_t i = 0; i < calls.size(); ++i) {
                 auto c = calls[i].connection.lock();
                 if (!c) continue;
                 if (code != grpc::StatusCode::OK) {
                   core.answered(c, calls[i].call, CoordinatorMethod::Join, code,
                                 code == grpc::StatusCode::INTERNAL
                                     ? "the coordinator's batched join reply is unreadable"
                                     : payload);
                   continue;
                 }
                 const auto& result = reply.results(static_cast<int>(i));
                 core.answered(c, calls[i].call, CoordinatorMethod::Join, result.code(),
                               result.code() == grpc::StatusCode::OK
                                   ? result.reply().SerializeAsString()
                                   : result.message());
               }
               core.joins.returned(core);
             });
  }

  // KvSet and KvMultiSet calls with the same auth as one KvMultiSet, their entries in order. If
  // it is refused (a limit), each call goes again on its own, so each gets its own answer.
  void sendSets(std::vector<Call> calls) {
    proto::KvMultiSetRequest request;
    std::vector<Call> together, alone;
    for (auto& call : calls) {
      proto::KvMultiSetRequest one;
      bool parsed = false;
      if (call.method == CoordinatorMethod::KvSet) {
        proto::KvSetRequest set;
        parsed = set.ParseFromString(call.payload);
        *one.mutable_auth() = set.auth();
        auto* entry = one.add_entries();
        entry->set_key(set.key());
        entry->set_value(set.value());
      } else {
        parsed = one.ParseFromString(call.payload);
      }
      const bool sameAuth = together.empty() ||
                            (one.auth().token() == request.auth().token() &&
                             one.auth().epoch() == request.auth().epoch());
      if (!parsed || !sameAuth) {
        alone.push_back(std::move(call));
        continue;
      }
      if (together.empty()) *request.mutable_auth() = one.auth();
      for (auto& entry : *one.mutable_entries()) *request.add_entries() = std::move(entry);
      together.push_back(std::move(call));
    }
    for (auto& call : alone) forward(std::move(call));
    if (together.empty()) return sets.returned(*this);
    upstream(grpcMethodPath(CoordinatorMethod::KvMultiSet), request.SerializeAsString(),
             longestDeadline(together), false,
             [together](Core& core, int code, const std::string&) {
               for (const auto& call : together) {
                 if (code != grpc::StatusCode::OK) {
                   core.forward(call);
                 } else if (auto c = call.connection.lock()) {
                   core.answered(c, call.call, call.method, code, "");
                 }
               }
               core.sets.returned(core);
             });
  }

  void answered(const ConnectionPtr& c, uint32_t call, CoordinatorMethod method, int code,
                const std::string& payload) {
    if (code == grpc::StatusCode::OK && method == CoordinatorMethod::Join) {
      proto::JoinReply join;
      if (join.ParseFromString(payload)) {
        c->rank = join.rank();
        if (c->host) pendingUp.set_host_rank(c->rank);
        if (!session) startSession(join);
        sendUp();
      }
    }
    if (code == grpc::StatusCode::OK && method == CoordinatorMethod::Report) c->reported = true;
    reply(c, call, method, code, payload);
  }

  // Local: the rank's latest progress waits for the next upstream message.
  void heartbeat(const ConnectionPtr& c, uint32_t call) {
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

  void watch(const ConnectionPtr& c, uint32_t call) {
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

  void sendCommand(const ConnectionPtr& c, const proto::Command& command) {
    FrameHeader header;
    header.call = c->watchCall;
    header.method = static_cast<uint8_t>(CoordinatorMethod::Command);
    send(c, header, command.SerializeAsString());
  }

  void endWatch(const ConnectionPtr& c) {
    reply(c, c->watchCall, CoordinatorMethod::Watch, sessionEnd->error_code(),
          sessionEnd->error_message());
  }

  void startSession(const proto::JoinReply& join) {
    if (join.heartbeat_interval_ms() > 0)
      beatInterval = std::chrono::milliseconds(join.heartbeat_interval_ms());
    session = std::make_shared<Session>(weak_from_this(), inFlight);
    session->start(*stub, session);
    pendingUp.mutable_auth()->set_token(options.token);
    pendingUp.mutable_auth()->set_epoch(join.epoch());
    sendUp();
    armBeatTimer();
  }

  void armBeatTimer() {
    beatTimer.expires_after(beatInterval);
    beatTimer.async_wait([self = shared_from_this()](const boost::system::error_code& error) {
      if (error) return;
      self->flushBeats();
      self->armBeatTimer();
    });
  }

  void flushBeats() {
    const auto now = std::chrono::steady_clock::now();
    for (auto& [rank, received] : beats) {
      auto& [beat, at] = received;
      beat.set_age_ms(static_cast<uint32_t>(
          std::chrono::duration_cast<std::chrono::milliseconds>(now - at).count()));
      *pendingUp.add_beats() = std::move(beat);
    }
    beats.clear();
    sendUp();
  }

  // Writes what is pending on the session when no write is in flight.
  void sendUp() {
    if (!session || upstreamWriting || sessionEnd) return;
    if (pendingUp.ByteSizeLong() == 0) return;
    upstreamWriting = true;
    session->write(std::exchange(pendingUp, proto::NodeUp{}));
  }

  void upstreamWritten(bool ok) {
    upstreamWriting = false;
    if (ok) sendUp();  // a failed write: OnDone says why
  }

  void deliver(const proto::Command& command) {
    commands.push_back(command);
    for (const auto& c : connections)
      if (c->watchCall != 0) sendCommand(c, command);
  }

  void sessionDone(const grpc::Status& status) {
    sessionEnd = status;
    ended = true;
    beatTimer.cancel();
    for (const auto& c : connections)
      if (c->watchCall != 0) endWatch(c);
  }

  void close() {
    boost::system::error_code ignored;
    acceptor.close(ignored);
    beatTimer.cancel();
    for (const auto& c : std::vector<ConnectionPtr>(connections.begin(), connections.end())) {
      c->open = false;
      c->socket.close(ignored);
    }
    connections.clear();
    connectionCount = 0;
    if (session) session->cancel();
    std::lock_guard lock(forwardsMutex);
    for (auto* context : forwards) context->TryCancel();
  }

  asio::io_context& io;
  const NodeRelayOptions options;
  Local::acceptor acceptor;
  asio::steady_timer beatTimer;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<proto::Coordinator::Stub> stub;
  std::unique_ptr<grpc::GenericStub> generic;

  // The io thread's state.
  std::set<ConnectionPtr> connections;
  std::shared_ptr<Session> session;
  bool upstreamWriting = false;
  std::optional<grpc::Status> sessionEnd;
  proto::NodeUp pendingUp;
  // Since the last message, each with when it arrived.
  std::map<int, std::pair<proto::HeartbeatRequest, std::chrono::steady_clock::time_point>> beats;
  std::map<int, std::pair<proto::WorkerState, int64_t>> lastBeat;     // state and step, by rank
  std::vector<proto::Command> commands;                               // every one so far
  std::chrono::milliseconds beatInterval{1000};
  Batch joins{&Core::sendJoins}, sets{&Core::sendSets};

  // Read from other threads.
  std::atomic<size_t> connectionCount{0}, queued{0};
  std::atomic<bool> ended{false};
  std::mutex postMutex;
  bool closed = false;
  // gRPC calls whose callbacks have not finished (forwards and the session), and the forwards'
  // contexts, so that closing can cancel them.
  std::shared_ptr<std::atomic<int>> inFlight = std::make_shared<std::atomic<int>>(0);
  std::mutex forwardsMutex;
  std::set<grpc::ClientContext*> forwards;
};

NodeRelay::NodeRelay(asio::io_context& io, NodeRelayOptions options)
    : core_(std::make_shared<Core>(io, std::move(options))) {
  core_->listen();
}

NodeRelay::~NodeRelay() {
  {
    std::lock_guard lock(core_->postMutex);
    asio::post(core_->io, [core = core_] { core->close(); });
    core_->closed = true;
  }
}

size_t NodeRelay::connections() const { return core_->connectionCount; }
bool NodeRelay::sessionEnded() const { return core_->ended; }
size_t NodeRelay::queuedWrites() const { return core_->queued; }

void closeRelays(std::vector<std::unique_ptr<NodeRelay>> relays) {
  std::vector<std::shared_ptr<std::atomic<int>>> inFlight;
  for (const auto& relay : relays) inFlight.push_back(relay->core_->inFlight);
  relays.clear();  // each one's close runs on the io thread and cancels its gRPC calls
  for (const auto& calls : inFlight)
    while (*calls > 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

}  // namespace ds::worker
