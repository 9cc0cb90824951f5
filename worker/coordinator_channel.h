// The one way a worker-side process opens its gRPC channel to the coordinator: TLS when given,
// and keepalive so that a frozen or unreachable coordinator breaks the channel (and any stream on
// it) within two `keepalive` periods even when no call is in flight.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "contract/rank_contract.h"

namespace grpc {
class ByteBuffer;
class Channel;
}

namespace ds::worker {

std::shared_ptr<grpc::Channel> makeCoordinatorChannel(
    const std::string& address, const TlsFiles& tls,
    std::chrono::milliseconds keepalive = std::chrono::seconds(5));

// A generic call's message as one string (the relay forwards replies as bytes).
std::string bytesOf(const grpc::ByteBuffer& buffer);

}  // namespace ds::worker
