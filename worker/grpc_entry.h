// The worker's gRPC side: the direct route to the coordinator and the node relay. A ds-worker
// process loads it (libds-worker-grpc.so, built beside the executable) only when it needs it: to
// reach the coordinator directly, or to host its node's relay. A rank behind a relay never loads
// gRPC, Abseil or OpenSSL: 49 fewer shared libraries to map and relocate at every rank's start.
// Tests and benches link it in instead.
#pragma once

#include <memory>
#include <string>

#include "contract/rank_contract.h"
#include "worker/node_relay.h"

namespace ds::worker {

class CoordinatorTransport;

struct GrpcEntryPoints {
  std::unique_ptr<CoordinatorTransport> (*makeGrpcTransport)(const std::string& address,
                                                            const TlsFiles& tls);
  std::unique_ptr<RelayHost> (*hostRelay)(NodeRelayOptions options);
};

// The linked-in entry points, or those of the library loaded on first use. Throws ds::Error
// naming the library when it cannot be loaded.
const GrpcEntryPoints& grpcEntryPoints();

// Hosts the node's relay if this process is the first to bind `options.socketName` (binding needs
// no gRPC: only the process that gets the socket loads the gRPC side); nullptr when another
// process serves the node already. Throws ds::Error for any other failure.
std::unique_ptr<RelayHost> hostRelayIfFirst(NodeRelayOptions options);

}  // namespace ds::worker

extern "C" const ds::worker::GrpcEntryPoints* ds_worker_grpc_entry();
