// Node relay: one control connection per node. It serves the node's ranks on a Unix socket
// (worker/relay_protocol.h) and speaks for them to the coordinator on one gRPC channel:
// - their unary calls (Join, the key-value store, Report) go upstream unchanged, so the
//   coordinator still checks each one's token and epoch;
// - their heartbeats are answered locally and sent upstream together, once per heartbeat
//   interval (at once when a rank changes state or takes its first step), on one NodeSession
//   stream;
// - that stream also carries the commands down, which the relay hands to every rank's Watch;
// - a rank whose connection breaks before its Report went through is reported lost at once.
// So the coordinator sees one connection, one stream and one heartbeat message per node per
// interval, whatever the number of ranks on it.
//
// Threading: everything the relay owns is touched on the io_context's thread only; gRPC's
// callbacks post their results there.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "contract/rank_contract.h"

namespace boost::asio {
class io_context;
}

namespace ds::worker {

struct NodeRelayOptions {
  std::string socketName;  // relaySocketName(nonce, node)
  std::string coordinatorAddress;
  std::string token;  // the job's: local heartbeats and watches must carry it
  TlsFiles tls;
  // The upstream channel's ping period and ping timeout: a frozen coordinator is noticed within
  // two of them (the relay answers heartbeats itself, so it must notice in its ranks' stead).
  std::chrono::milliseconds keepalive{5000};
  // The socket already bound and listening (listenOnRelaySocket), which the relay then owns; -1:
  // the relay binds socketName itself.
  int listeningFd = -1;
};

class NodeRelay {
 public:
  // Binds the socket and starts accepting on `io`. Throws ds::Error when the name is taken
  // (another process serves this node already) or cannot be bound.
  NodeRelay(boost::asio::io_context& io, NodeRelayOptions options);
  // Closes the local connections and the upstream stream (on the io_context's thread, which must
  // still run them).
  ~NodeRelay();
  NodeRelay(const NodeRelay&) = delete;
  NodeRelay& operator=(const NodeRelay&) = delete;

  size_t connections() const;   // local connections open now
  size_t joinsSeen() const;     // join requests relayed so far (each rank joins once)
  bool sessionEnded() const;    // the upstream stream ended (coordinator gone or job over)
  size_t queuedWrites() const;  // local frames not yet written

 private:
  friend void closeRelays(std::vector<std::unique_ptr<NodeRelay>> relays);
  struct Core;
  std::shared_ptr<Core> core_;
};

// Destroys the relays and returns once none of their gRPC callbacks can still post to their
// io_context, which must be running on another thread meanwhile: only then may it stop.
void closeRelays(std::vector<std::unique_ptr<NodeRelay>> relays);

// A relay on its own thread and io_context: what a node agent or a worker hosts. An interface, so
// that a worker that loads gRPC only to host its relay (worker/grpc_entry.h) calls it through
// virtual functions, needing none of the relay's symbols at link time.
class RelayHost {
 public:
  virtual ~RelayHost() = default;
  // Returns when `ranks` joins have been relayed and at most `connections` local connections are
  // left (the node's other ranks joined and went), the upstream stream has ended, or `timeout`
  // has passed. A rank that finished first must not take the relay away from a slower one that
  // has not connected yet.
  virtual void waitForNodeRanks(size_t ranks, size_t connections,
                                std::chrono::milliseconds timeout) const = 0;
  // Returns when every frame queued for the local ranks is written, or `timeout` has passed.
  virtual void flush(std::chrono::milliseconds timeout) const = 0;
};

// Hosts the relay; throws as NodeRelay does.
std::unique_ptr<RelayHost> hostRelay(NodeRelayOptions options);

}  // namespace ds::worker
