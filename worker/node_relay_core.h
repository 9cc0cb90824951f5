// NodeRelay::Core: the relay's state and its two halves, private to worker/node_relay*.cc (it
// brings gRPC's and Asio's headers). The local half, the node's ranks on the Unix socket, is in
// node_relay.cc; the upstream half, the gRPC channel and the NodeSession stream, in
// node_relay_upstream.cc. Everything here is touched on the io_context's thread only, except the
// members under "Read from other threads".
#pragma once

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <boost/asio.hpp>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "coordinator.grpc.pb.h"
#include "worker/node_relay.h"
#include "worker/relay_protocol.h"

namespace ds::worker {

struct NodeRelay::Core : std::enable_shared_from_this<Core> {
  using Local = boost::asio::local::stream_protocol;

  // One rank's local connection.
  struct Connection {
    explicit Connection(boost::asio::io_context& io) : socket(io) {}
    Local::socket socket;
    FrameBuffer in;
    FrameHeader header;  // the frame being handled
    std::string payload;
    std::deque<std::string> writes;
    bool writing = false, open = true;
    bool host = false;           // the relay's own process: the rank it joins as hosts the relay
    bool authenticated = false;  // a request of it carried the job's token
    int rank = -1;               // known once its Join went through
    bool reported = false;       // its Report went through: its exit is not a loss
    uint32_t watchCall = 0;      // its Watch's call id, 0 while it has none
  };
  using ConnectionPtr = std::shared_ptr<Connection>;
  // The socket's abstract name is visible to every local user, and until a connection's first
  // request shows the job's token it may be anyone's of this uid: such connections are bounded
  // in number and in frame size, so idle or half-sent ones cannot take the rank's memory or
  // descriptors (a real rank's first call follows its connect at once).
  static constexpr size_t kMaxUnauthenticated = 64;
  static constexpr uint32_t kUnauthenticatedFramePayload = 64 << 10;
  size_t unauthenticated = 0;  // open connections not yet authenticated

  // One rank's call on its way up.
  struct Call {
    std::weak_ptr<Connection> connection;
    uint32_t call;
    CoordinatorMethod method;
    std::string payload;
    uint32_t deadlineMs;
  };

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

  class Session;  // the NodeSession stream (node_relay_upstream.cc)

  Core(boost::asio::io_context& io, NodeRelayOptions o)
      : io(io), options(std::move(o)), acceptor(io), beatTimer(io) {}

  // From a gRPC thread: runs `work` on the io thread unless the relay is gone or closed. The
  // strong reference lives in the posted handler, so the Core is only ever destroyed on the io
  // side, never on a gRPC thread.
  static void postTo(const std::weak_ptr<Core>& weak, std::function<void(Core&)> work);
  static void postTo(std::shared_ptr<Core> core, std::function<void(Core&)> work);

  // The local half (node_relay.cc).
  void listen();  // binds (or takes) the socket, opens the channel, starts accepting
  void accept();
  // Reads whatever the socket has and handles every complete frame in it.
  void readMore(const ConnectionPtr& c);
  void send(const ConnectionPtr& c, const FrameHeader& header, const std::string& payload);
  // Everything queued for a rank goes out in one write.
  void pumpWrites(const ConnectionPtr& c);
  void reply(const ConnectionPtr& c, uint32_t call, CoordinatorMethod method, int status,
             const std::string& payload);
  // A local connection ended: its rank is lost unless it reported.
  void drop(const ConnectionPtr& c);
  void handle(const ConnectionPtr& c);
  // Local: the rank's latest progress waits for the next upstream message.
  void heartbeat(const ConnectionPtr& c, uint32_t call);
  void watch(const ConnectionPtr& c, uint32_t call);
  void sendCommand(const ConnectionPtr& c, const proto::Command& command);
  void endWatch(const ConnectionPtr& c);
  void deliver(const proto::Command& command);  // a command from upstream, to every watch
  void close();

  // The upstream half (node_relay_upstream.cc).
  // One gRPC call; `done(code, reply bytes or error text)` runs on the io thread.
  void upstream(const char* path, const std::string& request, uint32_t deadlineMs,
                bool waitForReady, std::function<void(Core&, int, const std::string&)> done);
  // Upstream unchanged, answered as the coordinator answers.
  void forward(Call call);
  static uint32_t longestDeadline(const std::vector<Call>& calls);  // a batch's deadline
  void sendJoins(std::vector<Call> waiting);
  // KvSet and KvMultiSet calls with the same auth as one KvMultiSet, their entries in order. If
  // it is refused (a limit), each call goes again on its own, so each gets its own answer.
  void sendSets(std::vector<Call> calls);
  void answered(const ConnectionPtr& c, uint32_t call, CoordinatorMethod method, int code,
                const std::string& payload);
  void startSession(const proto::JoinReply& join);
  void armBeatTimer();
  void flushBeats();
  // Writes what is pending on the session when no write is in flight.
  void sendUp();
  void upstreamWritten(bool ok);
  void sessionDone(const grpc::Status& status);
  void cancelUpstream();  // the session and every forwarded call

  boost::asio::io_context& io;
  const NodeRelayOptions options;
  Local::acceptor acceptor;
  boost::asio::steady_timer beatTimer;
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
  std::map<int, std::pair<proto::WorkerState, int64_t>> lastBeat;  // state and step, by rank
  std::vector<proto::Command> commands;                            // every one so far
  std::chrono::milliseconds beatInterval{1000};
  Batch joins{&Core::sendJoins}, sets{&Core::sendSets};

  // Read from other threads.
  std::atomic<size_t> connectionCount{0}, queued{0};
  std::atomic<size_t> joinsSeen{0};  // join requests relayed, one per rank of the node
  std::atomic<bool> ended{false};
  std::atomic<bool> closed{false};  // set by ~NodeRelay: no more work from gRPC callbacks
  // gRPC calls whose callbacks have not finished (forwards and the session), and the forwards'
  // contexts, so that closing can cancel them.
  std::shared_ptr<std::atomic<int>> inFlight = std::make_shared<std::atomic<int>>(0);
  std::mutex forwardsMutex;
  std::set<grpc::ClientContext*> forwards;
};

}  // namespace ds::worker
