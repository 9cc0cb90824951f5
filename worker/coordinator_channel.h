// The one way a worker-side process opens its gRPC channel to the coordinator: TLS when given,
// and keepalive so that a frozen or unreachable coordinator breaks the channel (and any stream on
// it) within two `keepalive` periods even when no call is in flight; and the one way it makes a
// unary call with a request already serialized (the relay forwards bytes). For the gRPC side only.
#pragma once

#include <grpcpp/generic/generic_stub.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "contract/rank_contract.h"

namespace ds::worker {

std::shared_ptr<grpc::Channel> makeCoordinatorChannel(
    const std::string& address, const TlsFiles& tls,
    std::chrono::milliseconds keepalive = std::chrono::seconds(5));

// Starts the unary call `path` ("/ds.proto.Coordinator/KvSet") with `request`'s bytes; `done(code,
// the reply's bytes or the error text)` runs once, on a gRPC thread. `context` (deadline,
// wait-for-ready, cancellation) must live until then.
void startUnaryCall(grpc::GenericStub& stub, grpc::ClientContext* context, const char* path,
                    const std::string& request,
                    std::function<void(int code, std::string reply)> done);

}  // namespace ds::worker
