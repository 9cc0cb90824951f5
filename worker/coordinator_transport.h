// How a worker's CoordinatorClient reaches the coordinator: gRPC straight to it, or its node's
// relay over a Unix socket (worker/relay_protocol.h). Internal to the worker: the client's
// header stays free of protobuf and gRPC.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "contract/rank_contract.h"
#include "coordinator.pb.h"
#include "worker/relay_protocol.h"

namespace ds::worker {

struct TransportStatus {
  int code = 0;  // a grpc::StatusCode
  std::string message;
  bool ok() const { return code == 0; }
};

class CoordinatorTransport {
 public:
  virtual ~CoordinatorTransport() = default;
  // One unary call. `waitForReady`: an unreachable coordinator (or relay) is waited for until the
  // deadline instead of failing at once.
  virtual TransportStatus call(CoordinatorMethod method, const google::protobuf::Message& request,
                               google::protobuf::Message* reply,
                               std::chrono::milliseconds deadline, bool waitForReady) = 0;
  // Reads the command stream until it ends; returns how it ended.
  virtual TransportStatus watch(const proto::WatchRequest& request,
                                const std::function<void(const proto::Command&)>& onCommand) = 0;
};

std::unique_ptr<CoordinatorTransport> makeGrpcTransport(const std::string& address,
                                                        const TlsFiles& tls);
// `socketName`: relaySocketName(...), in the abstract namespace.
std::unique_ptr<CoordinatorTransport> makeRelayTransport(const std::string& socketName);

}  // namespace ds::worker
