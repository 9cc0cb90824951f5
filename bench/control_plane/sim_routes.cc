// bench_control_plane's routes (sim_routes.h): a direct gRPC connection per simulated rank, or the
// node relay's local protocol over a Unix socket.
#include "bench/control_plane/sim_routes.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <boost/asio.hpp>
#include <chrono>
#include <deque>
#include <map>
#include <utility>
#include <vector>

#include "coordinator.grpc.pb.h"
#include "worker/coordinator_channel.h"

namespace ds::bench {
namespace {

namespace asio = boost::asio;
using ds::worker::FrameHeader;

// A worker as it was before node relays: its own gRPC connection, its own Watch stream.
class DirectRoute final : public Route {
 public:
  explicit DirectRoute(const std::string& address) {
    grpc::ChannelArguments arguments;
    arguments.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection of its own
    channel_ = grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), arguments);
    generic_ = std::make_unique<grpc::GenericStub>(channel_);
  }
  void call(CoordinatorMethod method, std::string request, Done done) override {
    auto context = std::make_shared<grpc::ClientContext>();
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(5));
    ds::worker::startUnaryCall(*generic_, context.get(), ds::worker::grpcMethodPath(method),
                               request,
                               [context, done](int code, std::string reply) { done(code, reply); });
  }
  void watch(std::string request, std::function<void(const std::string&)> onCommand,
             std::function<void()> onEnd) override {
    watch_ = std::make_unique<Reader>(*channel_, std::move(request), std::move(onCommand),
                                      std::move(onEnd));
  }
  void cancelWatch() override {
    if (watch_) watch_->context.TryCancel();
  }

 private:
  struct Reader final : grpc::ClientReadReactor<ds::proto::Command> {
    Reader(grpc::Channel& channel, std::string bytes,
           std::function<void(const std::string&)> onCommand, std::function<void()> onEnd)
        : onCommand(std::move(onCommand)), onEnd(std::move(onEnd)) {
      request.ParseFromString(bytes);
      ds::proto::Coordinator::NewStub(std::shared_ptr<grpc::Channel>(&channel, [](auto*) {}))
          ->async()
          ->Watch(&context, &request, this);
      StartRead(&command);
      StartCall();
    }
    void OnReadDone(bool ok) override {
      if (!ok) return;
      onCommand(command.SerializeAsString());
      StartRead(&command);
    }
    void OnDone(const grpc::Status&) override { onEnd(); }
    grpc::ClientContext context;
    ds::proto::WatchRequest request;
    ds::proto::Command command;
    std::function<void(const std::string&)> onCommand;
    std::function<void()> onEnd;
  };
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<grpc::GenericStub> generic_;
  std::unique_ptr<Reader> watch_;
};

// A worker behind its node's relay: the relay's local protocol on a Unix socket, driven by the
// bench's io_context (the same thread the relays run on, as a relay and its ranks would share a
// node's cores).
class RelayRoute final : public Route, public std::enable_shared_from_this<RelayRoute> {
 public:
  RelayRoute(asio::io_context& io, const std::string& socketName) : socket_(io) {
    socket_.connect(asio::local::stream_protocol::endpoint(socketName));
  }
  void start() { readNext(); }
  void call(CoordinatorMethod method, std::string request, Done done) override {
    const uint32_t id = nextCall_++;
    calls_[id] = std::move(done);
    send(method, id, request);
  }
  void watch(std::string request, std::function<void(const std::string&)> onCommand,
             std::function<void()> onEnd) override {
    watchCall_ = nextCall_++;
    onCommand_ = std::move(onCommand);
    onEnd_ = std::move(onEnd);
    send(CoordinatorMethod::Watch, watchCall_, request);
  }
  void cancelWatch() override {
    boost::system::error_code ignored;
    socket_.close(ignored);
  }

 private:
  void send(CoordinatorMethod method, uint32_t id, const std::string& payload) {
    FrameHeader header;
    header.call = id;
    header.method = static_cast<uint8_t>(method);
    header.deadlineMs = 5 * 60 * 1000;
    writes_.push_back(ds::worker::encodeFrame(header, payload));
    writeNext();
  }
  void writeNext() {
    if (writing_ || writes_.empty()) return;
    writing_ = true;
    std::vector<asio::const_buffer> buffers;
    for (const auto& frame : writes_) buffers.push_back(asio::buffer(frame));
    asio::async_write(socket_, buffers,
                      [self = shared_from_this(), count = buffers.size()](
                          const boost::system::error_code& error, size_t) {
                        self->writing_ = false;
                        if (error) return;
                        self->writes_.erase(self->writes_.begin(), self->writes_.begin() + count);
                        self->writeNext();
                      });
  }
  void readNext() {
    const auto [data, size] = in_.space();
    socket_.async_read_some(
        asio::buffer(data, size),
        [self = shared_from_this()](const boost::system::error_code& error, size_t bytes) {
          if (error) return self->ended();
          self->in_.added(bytes);
          while (self->in_.next(self->header_, self->payload_)) self->dispatch();
          self->readNext();
        });
  }
  void dispatch() {
    const auto method = static_cast<CoordinatorMethod>(header_.method);
    if (header_.call == watchCall_ && method == CoordinatorMethod::Command)
      return onCommand_(payload_);
    if (header_.call == watchCall_) return ended();
    auto it = calls_.find(header_.call);
    if (it == calls_.end()) return;
    Done done = std::move(it->second);
    calls_.erase(it);
    done(header_.status, payload_);
  }
  void ended() {
    if (onEnd_) std::exchange(onEnd_, nullptr)();
  }

  asio::local::stream_protocol::socket socket_;
  ds::worker::FrameBuffer in_;
  bool writing_ = false;
  FrameHeader header_;
  std::string payload_;
  std::deque<std::string> writes_;
  uint32_t nextCall_ = 1, watchCall_ = 0;
  std::map<uint32_t, Done> calls_;
  std::function<void(const std::string&)> onCommand_;
  std::function<void()> onEnd_;
};

}  // namespace

std::shared_ptr<Route> directRoute(const std::string& address) {
  return std::make_shared<DirectRoute>(address);
}

std::shared_ptr<Route> relayRoute(asio::io_context& io, const std::string& socketName) {
  auto route = std::make_shared<RelayRoute>(io, socketName);
  asio::post(io, [route] { route->start(); });
  return route;
}

}  // namespace ds::bench
