// The direct route: one gRPC channel to the coordinator, unary calls as serialized bytes (the
// relay's way too) and the Watch stream on the generated stub; and the channel and the call
// helper themselves, which the node relay and the bench use as well.
#include <grpcpp/grpcpp.h>

#include <future>

#include "coordinator.grpc.pb.h"
#include "grpc_process.h"
#include "worker/coordinator_channel.h"
#include "worker/coordinator_transport.h"

namespace ds::worker {
namespace {

class GrpcTransport final : public CoordinatorTransport {
 public:
  GrpcTransport(const std::string& address, const TlsFiles& tls)
      : channel_(makeCoordinatorChannel(address, tls)),
        stub_(proto::Coordinator::NewStub(channel_)),
        generic_(channel_) {}

  TransportStatus call(CoordinatorMethod method, const google::protobuf::Message& request,
                       google::protobuf::Message* reply, std::chrono::milliseconds deadline,
                       bool waitForReady) override {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + deadline);
    context.set_wait_for_ready(waitForReady);
    std::promise<TransportStatus> answered;
    std::string bytes;
    startUnaryCall(generic_, &context, grpcMethodPath(method), request.SerializeAsString(),
                   [&](int code, std::string payload) {
                     bytes = std::move(payload);
                     answered.set_value({code, code == 0 ? "" : bytes});
                   });
    const TransportStatus status = answered.get_future().get();
    if (status.ok() && reply != nullptr && !reply->ParseFromString(bytes))
      return {static_cast<int>(grpc::StatusCode::INTERNAL),
              std::string("unreadable ") + methodName(method) + " reply"};
    return status;
  }

  TransportStatus watch(const proto::WatchRequest& request,
                        const std::function<void(const proto::Command&)>& onCommand) override {
    grpc::ClientContext context;
    auto reader = stub_->Watch(&context, request);
    proto::Command command;
    while (reader->Read(&command)) onCommand(command);
    const grpc::Status status = reader->Finish();
    return {static_cast<int>(status.error_code()), status.error_message()};
  }

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<proto::Coordinator::Stub> stub_;  // the Watch stream's
  grpc::GenericStub generic_;                       // every unary call's
};

std::string bytesOf(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  std::string bytes;
  if (!buffer.Dump(&slices).ok()) return bytes;
  for (const auto& slice : slices)
    bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  return bytes;
}

}  // namespace

std::shared_ptr<grpc::Channel> makeCoordinatorChannel(const std::string& address,
                                                      const TlsFiles& tls,
                                                      std::chrono::milliseconds keepalive) {
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (!tls.certPem.empty() || !tls.caPem.empty()) {
    grpc::SslCredentialsOptions options;
    options.pem_root_certs = tls.caPem;
    options.pem_private_key = tls.keyPem;
    options.pem_cert_chain = tls.certPem;
    credentials = grpc::SslCredentials(options);
  }
  grpc::ChannelArguments arguments;
  arguments.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, static_cast<int>(keepalive.count()));
  arguments.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, static_cast<int>(keepalive.count()));
  arguments.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  arguments.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  // A connection of its own per channel, so that relays simulated in one process (the bench)
  // each hold one, as real ones do.
  arguments.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  // Control messages are small: no bandwidth-delay probe pings (the coordinator skips them too).
  arguments.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  prepareGrpcProcess();
  return grpc::CreateCustomChannel(address, credentials, arguments);
}

void startUnaryCall(grpc::GenericStub& stub, grpc::ClientContext* context, const char* path,
                    const std::string& request,
                    std::function<void(int code, std::string reply)> done) {
  struct Buffers {
    grpc::ByteBuffer request, reply;
  };
  auto buffers = std::make_shared<Buffers>();
  grpc::Slice slice(request);
  buffers->request = grpc::ByteBuffer(&slice, 1);
  stub.UnaryCall(context, path, grpc::StubOptions(), &buffers->request, &buffers->reply,
                 [buffers, done = std::move(done)](grpc::Status status) {
                   done(status.error_code(),
                        status.ok() ? bytesOf(buffers->reply) : status.error_message());
                 });
}

std::unique_ptr<CoordinatorTransport> makeGrpcTransport(const std::string& address,
                                                        const TlsFiles& tls) {
  return std::make_unique<GrpcTransport>(address, tls);
}

}  // namespace ds::worker
