// How bench_control_plane's simulated ranks reach the coordinator: directly, each with its own
// gRPC connection and Watch stream (as workers did before node relays), or through their node's
// relay on its Unix socket, speaking the relay's local protocol as ds-worker does.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "worker/relay_protocol.h"

namespace boost::asio {
class io_context;
}

namespace ds::bench {

using ds::worker::CoordinatorMethod;

// How a simulated rank reaches the coordinator: serialized requests in, serialized replies out,
// each answered once through `done(status code, reply bytes or error text)`.
class Route {
 public:
  using Done = std::function<void(int code, const std::string& reply)>;
  virtual ~Route() = default;
  virtual void call(CoordinatorMethod method, std::string request, Done done) = 0;
  // Opens the command stream: every command's bytes to onCommand, then onEnd once.
  virtual void watch(std::string request, std::function<void(const std::string&)> onCommand,
                     std::function<void()> onEnd) = 0;
  virtual void cancelWatch() = 0;
};

// Its own gRPC connection to `address`; callbacks run on gRPC's threads.
std::shared_ptr<Route> directRoute(const std::string& address);
// A connection to the relay serving `socketName`; reads start on `io`, where its callbacks run.
std::shared_ptr<Route> relayRoute(boost::asio::io_context& io, const std::string& socketName);

}  // namespace ds::bench
