// The gRPC side's one exported function (see grpc_entry.h).
#include "worker/grpc_entry.h"

#include "worker/coordinator_transport.h"

extern "C" const ds::worker::GrpcEntryPoints* ds_worker_grpc_entry() {
  static const ds::worker::GrpcEntryPoints entry{&ds::worker::makeGrpcTransport,
                                                  &ds::worker::hostRelay};
  return &entry;
}
